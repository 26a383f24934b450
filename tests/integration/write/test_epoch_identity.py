"""Exactly-once under what operators do: new checkpoints on an old prefix, deleted checkpoints,
re-run batch jobs, a consumer group in use. Each scenario ends with the rows exactly once, or with a
loud error before anything is visible, naming the fix. Only Spark's public API and the CLI are used,
and the outcome is counted by an independent read_committed consumer."""

from __future__ import annotations

import shutil
import threading
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import OffsetSpec
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_kafka_eos import activate_session
from spark_kafka_eos.cli import main as cli
from spark_kafka_eos.errors import CommitOutcome, commit_outcome
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import assert_stable
from tests.harness.pipeline import open_transactions

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def produce(kafka: KafkaTestCluster, topic: str, count: int, tag: str) -> list[Sent]:
    return kafka.produce_plain(topic, [Sent(0, None, f"{tag}-{i}".encode()) for i in range(count)])


def stream(spark: SparkSession, kafka: KafkaTestCluster, source: str, sink: str, checkpoint: Path,
           prefix: str | None, max_offsets: int = 20, **options: str) -> None:
    """One AvailableNow run of a source -> sink query; raises if the query fails."""
    df = (spark.readStream.format("kafka_eos").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
          .option("subscribe", source).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(max_offsets)).load())
    writer = (df.selectExpr("value", "topic AS source_topic", "partition AS source_partition", "offset AS source_offset")
              .writeStream.format("kafka_eos").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("topic", sink).option("checkpointLocation", str(checkpoint)).trigger(availableNow=True))
    if prefix is not None:
        writer = writer.option("transactional.id.prefix", prefix)
    for name, value in options.items():
        writer = writer.option(name, value)
    query = writer.start()
    query.awaitTermination(300)
    error = query.exception()
    if error is not None:
        raise error


def values(kafka: KafkaTestCluster, topic: str) -> list[bytes]:
    kafka.wait_until_stable(topic)
    return sorted(r.value or b"" for r in kafka.read_committed(topic))


def expected(*batches: list[Sent]) -> list[bytes]:
    return sorted(s.value or b"" for batch in batches for s in batch)


def reset(kafka: KafkaTestCluster, prefix: str) -> None:
    assert cli(["reset", "--bootstrap-servers", kafka.bootstrap_servers, "--prefix", prefix, "--yes"]) == 0


@pytest.mark.parametrize("first_batches", ["one", "several"])
def test_a_second_query_on_the_same_prefix_fails_loudly_until_the_prefix_is_reset(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path, first_batches: str) -> None:
    """The reported silent loss: with one micro-batch, the first query's last decision was batch 0, and the
    second query's batch 0 was taken for a replay of it: "success", and none of its rows written."""
    first_source, second_source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    prefix = f"orders-{uuid.uuid4().hex[:6]}"
    first = produce(kafka, first_source, 50, "first")
    stream(spark, kafka, first_source, sink, tmp_path / "checkpoint-1", prefix, max_offsets=100 if first_batches == "one" else 20)
    second = produce(kafka, second_source, 30, "second")

    # A new query (its own new checkpoint) on the prefix of the first one.
    refusal = "refused micro-batch 0 of streaming query .*owned by another streaming query.*kafka-eos reset"
    with pytest.raises(StreamingQueryException, match=refusal) as refused:
        stream(spark, kafka, second_source, sink, tmp_path / "checkpoint-2", prefix)
    assert commit_outcome(refused.value) is CommitOutcome.REFUSED  # through Spark's wrapping
    assert values(kafka, sink) == expected(first)
    assert open_transactions(kafka, prefix) == []

    reset(kafka, prefix)
    stream(spark, kafka, second_source, sink, tmp_path / "checkpoint-2", prefix)
    assert values(kafka, sink) == expected(first, second)
    assert open_transactions(kafka, prefix) == []


def test_a_deleted_and_recreated_checkpoint_fails_loudly_until_the_prefix_is_reset(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    checkpoint = tmp_path / "checkpoint"
    first = produce(kafka, source, 40, "r")
    stream(spark, kafka, source, sink, checkpoint, prefix=None, max_offsets=100)  # one micro-batch; the prefix derives from the checkpoint's path
    shutil.rmtree(checkpoint)  # "start over"

    with pytest.raises(StreamingQueryException, match="owned by another streaming query.*kafka-eos reset"):
        stream(spark, kafka, source, sink, checkpoint, prefix=None)
    assert values(kafka, sink) == expected(first)

    from spark_kafka_eos._internal.config.writer import derived_prefix

    reset(kafka, derived_prefix(str(checkpoint)))
    shutil.rmtree(checkpoint)
    stream(spark, kafka, source, sink, checkpoint, prefix=None)
    assert values(kafka, sink) == expected(first, first)  # started over from the earliest offset, as asked


@pytest.mark.parametrize("restart", ["later-batches", "replay"])
def test_the_old_query_restarted_after_a_reset_proceeds_with_later_batches_and_is_refused_a_replay(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path, restart: str) -> None:
    """After ``kafka-eos reset``, the query that owned the prefix is restarted on its checkpoint. Its next
    micro-batch proceeds. A micro-batch it decided before the reset but had not recorded in its checkpoint
    (its driver died after the decision: here the checkpoint's last commit entry is deleted) would be
    replayed; the reset forgot that decision, so the replay is refused, loudly, and nothing is doubled."""
    source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    checkpoint, prefix = tmp_path / "checkpoint", f"orders-{uuid.uuid4().hex[:6]}"
    first = produce(kafka, source, 40, "first")
    stream(spark, kafka, source, sink, checkpoint, prefix)  # micro-batches 0 and 1
    assert sorted(int(f.name) for f in (checkpoint / "commits").iterdir() if f.name.isdigit()) == [0, 1]
    if restart == "replay":
        (checkpoint / "commits" / "1").unlink()
    reset(kafka, prefix)
    later = produce(kafka, source, 20, "later")

    if restart == "replay":
        with pytest.raises(StreamingQueryException, match="refused micro-batch 1 .*was reset after micro-batch 1 .*a replay that can no longer be recognised"):
            stream(spark, kafka, source, sink, checkpoint, prefix)
        assert values(kafka, sink) == expected(first)
    else:
        stream(spark, kafka, source, sink, checkpoint, prefix)  # micro-batch 2
        assert values(kafka, sink) == expected(first, later)
    assert open_transactions(kafka, prefix) == []
    assert_stable(kafka, sink, "_kafka_eos_decisions")


def batch_write(df: DataFrame, kafka: KafkaTestCluster, sink: str, prefix: str, **options: str) -> None:
    writer = (df.write.format("kafka_eos").mode("append").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("topic", sink).option("transactional.id.prefix", prefix))
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.save()


def test_a_batch_job_re_run_with_its_write_id_writes_nothing_more_and_succeeds(
        spark: SparkSession, kafka: KafkaTestCluster) -> None:
    sink, prefix = kafka.create_topic(2, "sink"), f"backfill-{uuid.uuid4().hex[:6]}"
    df = spark.range(100).selectExpr("CAST(id AS STRING) AS value").repartition(3)
    batch_write(df, kafka, sink, prefix, writeId="2026-11-22")
    batch_write(df, kafka, sink, prefix, writeId="2026-11-22")  # the orchestrator retries the job
    assert values(kafka, sink) == sorted(str(i).encode() for i in range(100))
    batch_write(df, kafka, sink, prefix, writeId="2026-11-23")  # another run is another write
    assert values(kafka, sink) == sorted(str(i).encode() for i in range(100) for _ in range(2))
    assert open_transactions(kafka, prefix) == []


def test_a_batch_job_on_a_prefix_a_stream_owns_is_refused_before_any_task_writes(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    prefix = f"shared-{uuid.uuid4().hex[:6]}"
    sent = produce(kafka, source, 20, "s")
    stream(spark, kafka, source, sink, tmp_path / "checkpoint", prefix)
    written = kafka.offsets(sink, OffsetSpec.latest(), committed=False)
    with pytest.raises(Exception, match="owned by another streaming query"):
        batch_write(spark.range(10).selectExpr("CAST(id AS STRING) AS value"), kafka, sink, prefix)
    assert kafka.offsets(sink, OffsetSpec.latest(), committed=False) == written
    assert values(kafka, sink) == expected(sent)


def test_a_consumer_group_with_active_members_is_refused(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    group = f"app-{uuid.uuid4().hex[:6]}"
    produce(kafka, source, 10, "g")
    member = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        member.subscribe([source])
        while not member.assignment():
            member.poll(0.2)
        with pytest.raises(Exception, match=f"consumerGroup.*'{group}', a group with 1 active member"):
            stream(spark, kafka, source, sink, tmp_path / "checkpoint", f"g-{group}", consumerGroup=group)
    finally:
        member.close()
    assert values(kafka, sink) == []


def test_consumer_group_offsets_never_move_backwards(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    group = f"etl-{uuid.uuid4().hex[:6]}"
    sent = produce(kafka, source, 60, "o")
    stream(spark, kafka, source, sink, tmp_path / "checkpoint-1", f"one-{group}", consumerGroup=group)
    # Another query with its own prefix, starting over from the earliest offset, but the first one's group.
    with pytest.raises(StreamingQueryException, match=f"would move consumerGroup '{group}' backwards.*{source}-0: 20 < 60"):
        stream(spark, kafka, source, sink, tmp_path / "checkpoint-2", f"two-{group}", consumerGroup=group)
    assert values(kafka, sink) == expected(sent)
    probe = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    try:
        assert [tp.offset for tp in probe.committed([TopicPartition(source, 0)], timeout=30)] == [60]
    finally:
        probe.close()


def test_a_second_query_started_while_the_owner_runs_is_refused_and_the_owner_goes_on(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """Two queries on one prefix at the same time (a copy of the job started by mistake): the newcomer
    fails at its first commit before anything of it is visible; the owner, running throughout, is not
    disturbed and keeps writing exactly once."""
    owner_source, copy_source, sink = kafka.create_topic(2, "src"), kafka.create_topic(1, "src"), kafka.create_topic(2, "sink")
    prefix = f"shared-{uuid.uuid4().hex[:6]}"

    def query(source: str, checkpoint: Path) -> StreamingQuery:
        df = (spark.readStream.format("kafka_eos").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("subscribe", source).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "30").load())
        return (df.selectExpr("value").writeStream.format("kafka_eos").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
                .option("topic", sink).option("transactional.id.prefix", prefix).option("checkpointLocation", str(checkpoint))
                .trigger(processingTime="200 milliseconds").start())

    first = produce(kafka, owner_source, 60, "owner")
    owner = query(owner_source, tmp_path / "owner")
    try:
        owner.processAllAvailable()
        copy = query(copy_source, tmp_path / "copy")
        produce(kafka, copy_source, 40, "copy")
        second = produce(kafka, owner_source, 60, "owner-more")
        with pytest.raises(StreamingQueryException, match="owned by another streaming query.*kafka-eos reset"):
            copy.awaitTermination(180)
        third = produce(kafka, owner_source, 30, "owner-last")
        owner.processAllAvailable()
        assert owner.isActive and owner.exception() is None
    finally:
        owner.stop()
    assert values(kafka, sink) == expected(first, second, third)
    assert open_transactions(kafka, prefix) == []


def test_two_batch_jobs_on_one_prefix_at_once_each_write_all_or_nothing(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """Two df.write jobs with their own writeIds on one prefix, run at the same time: whatever their
    interleaving, a job that succeeds has all its rows exactly once, and a job that fails, with the
    sink's own error, wrote nothing visible. Nothing stays open. (When their decisions overlap, each
    fences the other's coordinator, and both can fail: safe, not live; see the README.)"""
    sink, prefix = kafka.create_topic(2, "sink"), f"concurrent-{uuid.uuid4().hex[:6]}"
    jobs = {name: spark.range(200).selectExpr(f"CONCAT('{name}-', CAST(id AS STRING)) AS value").repartition(3) for name in ("a", "b")}
    outcomes: dict[str, BaseException | None] = {}

    def run(name: str) -> None:
        activate_session(spark)
        try:
            batch_write(jobs[name], kafka, sink, prefix, writeId=f"job-{name}")
            outcomes[name] = None
        except BaseException as error:  # noqa: B902 - the outcome is the assertion
            outcomes[name] = error

    threads = [threading.Thread(target=run, args=(name,)) for name in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert set(outcomes) == {"a", "b"}
    written = values(kafka, sink)
    for name, error in outcomes.items():
        rows = [v for v in written if v.startswith(f"{name}-".encode())]
        if error is None:
            assert sorted(rows) == sorted(f"{name}-{i}".encode() for i in range(200)), f"job {name} succeeded"
        else:
            assert rows == [], f"job {name} failed ({error}) but {len(rows)} of its rows are visible"
            assert "spark_kafka_eos.errors.KafkaEos" in str(error), error
    assert open_transactions(kafka, prefix) == []
    assert_stable(kafka, sink)
    # Safe is not enough: a failed job re-run alone succeeds, and then each job's rows are there exactly once.
    for name in sorted(n for n, error in outcomes.items() if error is not None):
        batch_write(jobs[name], kafka, sink, prefix, writeId=f"job-{name}")
    assert values(kafka, sink) == sorted(f"{name}-{i}".encode() for name in jobs for i in range(200))
    assert open_transactions(kafka, prefix) == []


def test_a_write_from_a_thread_of_its_own_finds_the_source_once_its_session_is_activated(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """pyspark resolves a Python data source for a write through the JVM thread's active session: a new
    thread has none, and ``format("kafka_eos")`` is not found until :func:`activate_session`."""
    sink, prefix = kafka.create_topic(1, "sink"), f"threaded-{uuid.uuid4().hex[:6]}"
    df = spark.range(10).selectExpr("CAST(id AS STRING) AS value")
    errors: list[BaseException] = []

    def write(activate: bool) -> None:
        if activate:
            activate_session(spark)
        try:
            batch_write(df, kafka, sink, prefix, writeId=f"activated-{activate}")
        except BaseException as error:  # noqa: B902 - the outcome is the assertion
            errors.append(error)

    for activate in (False, True):
        thread = threading.Thread(target=write, args=(activate,))
        thread.start()
        thread.join(120)
    assert len(errors) == 1 and "DATA_SOURCE_NOT_FOUND" in str(errors[0]), errors
    assert values(kafka, sink) == sorted(str(i).encode() for i in range(10))
