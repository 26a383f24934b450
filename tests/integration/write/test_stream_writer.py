"""df.writeStream.format("kafka_eos"): exactly-once micro-batches on a real broker."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import OffsetSpec
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from spark_kafka_eos._internal.config.writer import derived_prefix, parse_writer_options
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from tests.harness.faults import clear_fired, fired
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import assert_stable, transactions_by_kafka
from tests.harness.notebook_runner import notebook_command, run_notebook
from tests.harness.pipeline import Pipeline, open_transactions

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
PROJECT = Path(__file__).resolve().parents[3]
PIPELINE_NOTEBOOK = PROJECT / "notebooks" / "eos_pipeline.py"


def pipeline_widgets(bootstrap: str, source: str, sink: str, checkpoint: str, group: str) -> dict[str, str]:
    # One Spark partition (one participant) a source partition: the kill points need several participants.
    return {"bootstrap_servers": bootstrap, "source": source, "sink": sink, "checkpoint": checkpoint, "consumer_group": group,
            "kafka_options": json.dumps({"minRecordsPerPartition": "0"})}


def pipeline_job(bootstrap: str, source: str, sink: str, checkpoint: str, group: str) -> list[str]:
    """The pipeline notebook, run by the notebook runner in a driver process of its own."""
    return notebook_command(PIPELINE_NOTEBOOK, **pipeline_widgets(bootstrap, source, sink, checkpoint, group))


def test_many_batches_exactly_once_in_order(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    sent = pipeline.produce(300)
    query = pipeline.start(maxOffsetsPerTrigger=60)
    try:
        query.processAllAvailable()
        sent += pipeline.produce(200, start=300)
        query.processAllAvailable()
        batches = [p for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    assert len(batches) >= 9
    pipeline.assert_exactly_once(sent)


@pytest.mark.parametrize("point", ["before_decision", "after_decision", "during_phase2"])
def test_a_driver_failure_then_a_restart_is_exactly_once(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path, point: str) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    sent = pipeline.produce(120)
    clear_fired()
    failing = pipeline.start(maxOffsetsPerTrigger=40, **{"testing.failAt": point})
    with pytest.raises(StreamingQueryException, match="Injected fault"):
        failing.awaitTermination(180)
    assert len(fired(point)) == 1
    restarted = pipeline.start(maxOffsetsPerTrigger=40)
    try:
        restarted.processAllAvailable()
    finally:
        restarted.stop()
    pipeline.assert_exactly_once(sent)


@pytest.mark.parametrize("mode", ["raise", "kill"])
def test_a_task_failing_mid_write_is_retried_exactly_once(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path, mode: str) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    sent = pipeline.produce(150)
    # Small Arrow batches: the first attempt of partition 0 fails after writing its first batch.
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "5")
    fault = "task_write" + (":kill" if mode == "kill" else "")
    clear_fired()
    try:
        query = pipeline.start(maxOffsetsPerTrigger=60, **{"testing.failAt": fault})
        try:
            query.processAllAvailable()
            retried = query.lastProgress is not None
        finally:
            query.stop()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert retried
    # In each micro-batch, the first attempt of partition 0 failed after writing a batch, and was retried.
    failed_attempts = fired(fault)
    assert failed_attempts and len(set(failed_attempts)) == len(failed_attempts)
    pipeline.assert_exactly_once(sent)


def test_a_zombie_attempt_is_fenced_and_aborted(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    zombie = kafka.producer(f"{pipeline.prefix}-deadbeef-0-0-7")
    zombie.begin_transaction()
    zombie.produce(pipeline.sink, value=b"zombie", partition=0)
    zombie.flush(30)
    assert pipeline.open_transactions() == [f"{pipeline.prefix}-deadbeef-0-0-7"]
    sent = pipeline.produce(60)
    query = pipeline.start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    pipeline.assert_exactly_once(sent)
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(30)
    # Fenced, not merely timed out: the sweep bumped its epoch.
    assert fenced.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), fenced.value
    assert b"zombie" not in {r.value for r in kafka.read_committed(pipeline.sink)}


# during_phase2 is in the long tier; make test runs it in-process (test_a_driver_failure_then_a_restart_is_exactly_once)
@pytest.mark.parametrize("point", ["after_decision", pytest.param("during_phase2", marks=pytest.mark.long)])
def test_the_driver_killed_in_its_commit_is_rolled_forward_at_the_restart(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path,
                                                                          point: str) -> None:
    """A real crash: the pipeline's driver JVM is SIGKILLed right after the decision of its first
    micro-batch (``after_decision``), or after phase 2 committed its first participant only
    (``during_phase2``), so neither the rest of phase 2 nor Spark's abort runs. The state between the
    crash and the restart is checked with Kafka's own tool; the restarted query (the test session's
    driver, on the same checkpoint) rolls the decision forward before its tasks run, and its replay of
    the batch is recognised and aborted."""
    source, sink = kafka.create_topic(3, prefix="src"), kafka.create_topic(3, prefix="sink")
    sent = kafka.produce_plain(source, [Sent(i % 3, f"k{i}".encode(), f"order {i}".encode()) for i in range(2500)])
    group, checkpoint = f"g-{sink}", str(tmp_path / "checkpoint")
    job = pipeline_job(kafka.bootstrap_servers, source, sink, checkpoint, group)
    prefix = derived_prefix(checkpoint)
    options = parse_writer_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": sink,
                                    "transactional.id.prefix": prefix}, streaming=False)
    decision_log = KafkaDecisionLog(options)
    clear_fired()
    crashed = subprocess.run(job + ["--fail-at", f"{point}:kill-driver"], capture_output=True, text=True, timeout=300, cwd=PROJECT)
    assert crashed.returncode != 0
    assert len(fired(f"{point}:kill-driver")) == 1, crashed.stderr[-3000:]

    # Between the crash and the restart: the log's last record is the decision of batch 0 (1,000 records,
    # maxOffsetsPerTrigger), whose transaction also committed the group's offsets; Kafka holds every
    # participant open, except the first one when phase 2 had committed it.
    decided = decision_log.last(prefix)
    assert decided is not None and decided.kind == "decision" and decided.batch_id == 0
    decided_records = sum(n for p in decided.participants for _, _, n in p.records)
    assert decided_records == 1000
    assert sum(kafka.group_offsets(group, source).values()) == decided_records
    first, *rest = decided.participants
    states = transactions_by_kafka(kafka.bootstrap_servers, prefix + "-")
    assert {p.transactional_id: states.get(p.transactional_id) for p in decided.participants} == {
        p.transactional_id: "CompleteCommit" if point == "during_phase2" and p is first else "Ongoing" for p in decided.participants}
    assert rest, "batch 0 needs several participants"
    visible = kafka.read_committed(sink)
    if point == "after_decision":
        assert visible == []
    else:  # only the first participant's records can be visible (others' open transactions may pin them)
        assert {r.partition for r in visible} <= {p for _, p, _ in first.records}
        assert len(visible) <= sum(n for _, _, n in first.records)

    run_notebook(PIPELINE_NOTEBOOK, spark, pipeline_widgets(kafka.bootstrap_servers, source, sink, checkpoint, group))
    kafka.wait_until_stable(sink)
    out = kafka.read_committed(sink)
    assert sorted(r.value or b"" for r in out) == sorted(b"processed:" + (s.value or b"") for s in sent)
    assert open_transactions(kafka, prefix) == []
    assert_stable(kafka, sink, options.decision_log_topic)
    last = decision_log.last(prefix)
    assert last is not None and last.kind == "complete"
    assert kafka.group_offsets(group, source) == kafka.offsets(source, OffsetSpec.latest())
