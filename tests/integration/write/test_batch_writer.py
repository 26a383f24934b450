"""df.write.format("kafka_eos"): one two-phase commit per job; offsets in the transaction."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import OffsetSpec
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import udf

from spark_kafka_eos.errors import CommitOutcome, commit_outcome
from tests.harness.faults import FAIL_AT_OPTION, FAULTS_FORMAT, clear_fired, fired
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import assert_stable, open_transactions_by_kafka, transactions_by_kafka
from tests.harness.notebook_runner import notebook_command, run_notebook
from tests.harness.pipeline import Pipeline

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
PROJECT = Path(__file__).resolve().parents[3]


def write(df: DataFrame, pipeline: Pipeline, **options: object) -> None:
    writer = (
        df.write.format(FAULTS_FORMAT if FAIL_AT_OPTION in options else "kafka_eos").mode("append")
        .option("kafka.bootstrap.servers", pipeline.kafka.bootstrap_servers)
        .option("topic", pipeline.sink)
        .option("transactional.id.prefix", pipeline.prefix)
        .option("decisionLogTopic", pipeline.decision_log)
    )
    for name, value in options.items():
        writer = writer.option(name, str(value))
    writer.save()


def rows(spark: SparkSession, count: int, partitions: int = 3) -> DataFrame:
    return spark.range(0, count, numPartitions=partitions).selectExpr(
        "CAST(id AS STRING) AS key", "CONCAT('v', CAST(id AS STRING)) AS value", "CAST(id % 3 AS INT) AS partition"
    )


def sent(count: int) -> list[Sent]:
    return [Sent(i % 3, str(i).encode(), f"v{i}".encode()) for i in range(count)]


def test_a_batch_write_is_exactly_once(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    write(rows(spark, 300), pipeline)
    # Three Spark tasks write to each Kafka partition: no order between them.
    pipeline.assert_exactly_once(sent(300), ordered=False)


def test_a_job_with_a_permanently_failing_task_leaves_nothing(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)

    @udf("string")
    def fail_on_250(value):  # type: ignore[no-untyped-def]  # untyped: Spark infers no eval type from hints
        if value == "v250":
            raise ValueError("permanent failure")
        return value

    df = rows(spark, 300).withColumn("value", fail_on_250("value"))
    with pytest.raises(Exception, match="permanent failure"):
        write(df, pipeline)
    kafka.wait_until_stable(pipeline.sink)
    # Something was written (the log grew), and none of it is visible.
    assert sum(kafka.offsets(pipeline.sink, OffsetSpec.latest(), committed=False).values()) > 0
    assert kafka.read_committed(pipeline.sink) == []
    assert pipeline.open_transactions() == []


def test_a_job_outliving_the_transaction_timeout_is_aborted_before_deciding(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    # Small Arrow batches; partition 0's first attempt stalls 11 s after writing its first batch,
    # so its transaction has less than the 10 s margin left of 20 s (the least allowed) when the driver verifies it.
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "5")
    clear_fired()
    try:
        with pytest.raises(Exception, match="aborted instead of committed.*earliest participant times out .* less than the 10s margin") as aborted:
            write(rows(spark, 30), pipeline, **{"kafka.transaction.timeout.ms": 20_000, "testing.failAt": "task_write:sleep11"})
        assert commit_outcome(aborted.value) is CommitOutcome.ABORTED  # through Spark's wrapping
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert len(fired("task_write:sleep11")) == 1
    kafka.wait_until_stable(pipeline.sink)
    # Something was written (the log grew), and none of it is visible.
    assert sum(kafka.offsets(pipeline.sink, OffsetSpec.latest(), committed=False).values()) > 0
    assert kafka.read_committed(pipeline.sink) == []
    assert pipeline.open_transactions() == []


def test_group_offsets_follow_each_streaming_batch(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    group = f"etl-{uuid.uuid4().hex[:6]}"
    produced = pipeline.produce(90)
    source = pipeline.source_df(maxOffsetsPerTrigger=40).selectExpr(
        "key", "value", "partition", "topic AS source_topic", "partition AS source_partition", "offset AS source_offset"
    )
    query = pipeline.start(source, consumerGroup=group)
    try:
        query.processAllAvailable()
        assert kafka.group_offsets(group, pipeline.source) == kafka.offsets(pipeline.source, OffsetSpec.latest())
        produced += pipeline.produce(30, start=90)
        query.processAllAvailable()
        assert kafka.group_offsets(group, pipeline.source) == kafka.offsets(pipeline.source, OffsetSpec.latest())
    finally:
        query.stop()
    pipeline.assert_exactly_once(produced)


def test_a_backfill_run_twice_resumes_from_the_group(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    group = f"backfill-{uuid.uuid4().hex[:6]}"

    def backfill() -> None:
        df = (
            spark.read.format("kafka_eos")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("subscribe", pipeline.source)
            .option("startingOffsets", "group")
            .option("consumerGroup", group)
            .load()
            .selectExpr("key", "value", "partition", "topic AS source_topic", "partition AS source_partition", "offset AS source_offset")
        )
        write(df, pipeline, consumerGroup=group)

    produced = pipeline.produce(100)
    backfill()
    produced += pipeline.produce(50, start=100)
    backfill()
    backfill()  # nothing new: writes nothing
    pipeline.assert_exactly_once(produced)
    assert kafka.group_offsets(group, pipeline.source) == kafka.offsets(pipeline.source, OffsetSpec.latest())


BACKFILL_NOTEBOOK = PROJECT / "notebooks" / "backfill.py"


# make test runs after_decision (the roll-forward); the stream's variants cover the other points there, and the long tier
# runs these too (make test's budget).
@pytest.mark.parametrize("point", [pytest.param("before_decision", marks=pytest.mark.long), "after_decision",
                                   pytest.param("during_phase2", marks=pytest.mark.long)])
def test_a_backfill_whose_driver_is_killed_in_its_commit_is_finished_by_its_retry(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path,
                                                                                 point: str) -> None:
    """A real crash of a batch job: the backfill notebook's driver JVM is SIGKILLed in its commit.
    Before the decision nothing is visible and the group has not moved; after it, the group has moved
    with the decision. The orchestrator's retry (same ``write_id``) ends with every record exactly once,
    nothing open, and the group at the source's ends; the next run (a new ``write_id``, which reads from
    the group) writes nothing: run once, after the crash in phase 2 (the group's offsets, which decide it,
    are checked after every crash point). The retry and the next run are another driver: the test
    session's own (a driver start costs 15 s)."""
    source, sink = kafka.create_topic(3, prefix="src"), kafka.create_topic(3, prefix="sink")
    produced = kafka.produce_plain(source, [Sent(i % 3, f"k{i}".encode(), f"row {i}".encode()) for i in range(600)])
    tag = uuid.uuid4().hex[:6]
    group, prefix = f"backfill-{tag}", f"backfill-{tag}"
    # One Spark partition (one participant) a source partition: the kill points need several participants.
    widgets = {"bootstrap_servers": kafka.bootstrap_servers, "source": source, "sink": sink, "consumer_group": group,
               "prefix": prefix, "write_id": "2026-11-22", "kafka_options": json.dumps({"minRecordsPerPartition": "0"})}
    job = notebook_command(BACKFILL_NOTEBOOK, **widgets)
    clear_fired()
    crashed = subprocess.run(job + ["--fail-at", f"{point}:kill-driver"], capture_output=True, text=True, timeout=300, cwd=PROJECT)
    assert crashed.returncode != 0
    assert len(fired(f"{point}:kill-driver")) == 1, crashed.stderr[-3000:]

    written = kafka.offsets(sink, OffsetSpec.latest(), committed=False)
    assert sum(written.values()) >= 600, "the tasks wrote before the crash"
    open_now = transactions_by_kafka(kafka.bootstrap_servers, prefix + "-")
    group_now = kafka.group_offsets(group, source)
    if point == "before_decision":
        assert kafka.read_committed(sink) == []
        assert set(group_now.values()) == {-1001}
        assert [s for t, s in open_now.items() if t != f"{prefix}-coordinator"].count("Ongoing") == 3
    else:
        assert group_now == kafka.offsets(source, OffsetSpec.latest())
        assert "Ongoing" in open_now.values()

    run_notebook(BACKFILL_NOTEBOOK, spark, widgets)  # the retry
    if point == "during_phase2":
        run_notebook(BACKFILL_NOTEBOOK, spark, {**widgets, "write_id": "2026-11-23"})  # the next run
    kafka.wait_until_stable(sink)
    assert sorted(r.value or b"" for r in kafka.read_committed(sink)) == sorted(b"backfilled:" + (s.value or b"") for s in produced)
    assert open_transactions_by_kafka(kafka.bootstrap_servers, prefix + "-") == []
    assert_stable(kafka, sink, "_kafka_eos_decisions")
    assert kafka.group_offsets(group, source) == kafka.offsets(source, OffsetSpec.latest())
