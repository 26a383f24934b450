"""A replay must prove it is the same input (issue 48): a micro-batch Spark plans again over other offsets (its
offset log entry deleted to "reprocess the last batch", an older checkpoint snapshot restored), and a ``writeId``
re-run over other rows, are refused before anything of them is visible, and the refusal's fix works. A commit leaves
nothing open when its process ends right after it. Counted by an independent read_committed consumer."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from spark_kafka_eos._internal.cluster import open_session
from spark_kafka_eos._internal.config.writer import parse_writer_options
from spark_kafka_eos._internal.decision_log.coordinator_id import coordinator_transactional_id
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.txn.session import TxnState
from spark_kafka_eos.errors import CommitOutcome, commit_outcome
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.pipeline import open_transactions

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

REPLANNED = "Spark planned it again over other input than it was decided over"


def produce(kafka: KafkaTestCluster, topic: str, first: int, count: int) -> None:
    kafka.produce_plain(topic, [Sent(0, f"k{i}".encode(), f"v{i}".encode()) for i in range(first, first + count)])


def run(spark: SparkSession, kafka: KafkaTestCluster, source: str, sink: str, checkpoint: Path, prefix: str,
        max_offsets: int | None = None) -> None:
    """One AvailableNow run of ``kafka_eos`` source -> ``selectExpr("key", "value")`` -> ``kafka_eos`` sink: the rows
    carry no source columns. Raises what the query failed with."""
    reader = (spark.readStream.format("kafka_eos").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("subscribe", source).option("startingOffsets", "earliest"))
    if max_offsets is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    query = (reader.load().selectExpr("key", "value").writeStream.format("kafka_eos")
             .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", sink)
             .option("transactional.id.prefix", prefix).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    error = query.exception()
    if error is not None:
        raise error


def run_named(spark: SparkSession, kafka: KafkaTestCluster, source: str, sink: str, name: str, prefix: str,
              columns: tuple[str, ...], **reader_options: str) -> None:
    """One AvailableNow run of query ``name``, whose checkpoint is the session's (spark.sql.streaming.checkpointLocation,
    not an option of the writer), writing ``columns`` of the source. Raises what the query failed with."""
    query = (spark.readStream.format("kafka_eos").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
             .option("subscribe", source).option("startingOffsets", "earliest").options(**reader_options).load()
             .selectExpr(*columns)
             .writeStream.queryName(name).format("kafka_eos").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
             .option("topic", sink).option("transactional.id.prefix", prefix).trigger(availableNow=True).start())
    query.awaitTermination(300)
    if query.exception() is not None:
        raise query.exception()  # type: ignore[misc]


def forget_last_batch(checkpoint: Path, batch: int, keep: Path | None = None) -> None:
    """The operator's "reprocess the last batch": delete its offset and commit log entries (kept in ``keep``)."""
    for log in ("offsets", "commits"):
        entry = checkpoint / log / str(batch)
        if keep is not None and log == "offsets":
            shutil.copy(entry, keep)
        entry.unlink()
        (checkpoint / log / f".{batch}.crc").unlink(missing_ok=True)


def sink_values(kafka: KafkaTestCluster, topic: str) -> list[bytes]:
    kafka.wait_until_stable(topic)
    return sorted(r.value or b"" for r in kafka.read_committed(topic))


def values(first: int, count: int) -> list[bytes]:
    return sorted(f"v{i}".encode() for i in range(first, first + count))


def test_a_micro_batch_planned_again_over_more_records_is_refused_and_restoring_its_offsets_goes_on(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """The issue's first scenario: batch 0 wrote 100 records; 100 more arrive; its offset log entry is deleted and
    the query restarted, so Spark plans batch 0 again over 200. b0050cf took it for a replay and lost 100, silently."""
    source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    checkpoint, prefix, kept = tmp_path / "checkpoint", f"orders-{uuid.uuid4().hex[:6]}", tmp_path / "offsets-0"
    produce(kafka, source, 0, 100)
    run(spark, kafka, source, sink, checkpoint, prefix)
    produce(kafka, source, 100, 100)
    forget_last_batch(checkpoint, 0, keep=kept)

    with pytest.raises(StreamingQueryException, match=REPLANNED) as refused:
        run(spark, kafka, source, sink, checkpoint, prefix)
    message = str(refused.value)
    assert commit_outcome(refused.value) is CommitOutcome.REFUSED
    assert "Decided: 100 rows" in message and "This run: 200 rows" in message and "offsets/0 back" in message
    assert sink_values(kafka, sink) == values(0, 100)  # nothing of the refused run is visible
    assert open_transactions(kafka, prefix) == []

    # The refusal's fix: put offsets/0 back as it was. Spark replays batch 0 (recognised), then reads the rest.
    shutil.copy(kept, checkpoint / "offsets" / "0")
    (checkpoint / "offsets" / ".0.crc").unlink(missing_ok=True)
    run(spark, kafka, source, sink, checkpoint, prefix)
    assert sink_values(kafka, sink) == values(0, 200)
    assert open_transactions(kafka, prefix) == []


def test_a_micro_batch_planned_again_over_fewer_records_is_refused_instead_of_writing_the_rest_twice(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """The issue's second scenario: batch 0 wrote 200 records; the restart caps batches at 100, so batch 0 is planned
    again over the first 100 only. b0050cf skipped it as a replay and batch 1 wrote records 100-199 again."""
    source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    checkpoint, prefix = tmp_path / "checkpoint", f"orders-{uuid.uuid4().hex[:6]}"
    produce(kafka, source, 0, 200)
    run(spark, kafka, source, sink, checkpoint, prefix)
    forget_last_batch(checkpoint, 0)

    with pytest.raises(StreamingQueryException, match=REPLANNED) as refused:
        run(spark, kafka, source, sink, checkpoint, prefix, max_offsets=100)
    assert "Decided: 200 rows" in str(refused.value) and "This run: 100 rows" in str(refused.value)
    assert sink_values(kafka, sink) == values(0, 200)  # no duplicates
    assert open_transactions(kafka, prefix) == []


def test_a_write_id_re_run_over_other_rows_is_refused_and_over_the_same_rows_writes_nothing(
        spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """A backfill re-run with corrected data under the same writeId: b0050cf "succeeded" without writing it."""
    sink = kafka.create_topic(2, "sink")
    prefix = f"backfill-{uuid.uuid4().hex[:6]}"

    def write(rows: int, write_id: str) -> None:
        (spark.range(rows).selectExpr("CAST(id AS STRING) AS value").repartition(3).write.format("kafka_eos")
         .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", sink)
         .option("transactional.id.prefix", prefix).option("writeId", write_id).mode("append").save())

    write(50, "2026-11-01")
    write(50, "2026-11-01")  # the same input: a no-op
    assert len(sink_values(kafka, sink)) == 50
    with pytest.raises(Exception, match="writeId 2026-11-01 is committed over an input of 50 rows, and this run's input has 52 rows"):
        write(52, "2026-11-01")
    assert len(sink_values(kafka, sink)) == 50
    write(52, "2026-11-01-corrected")  # the fix the refusal names
    assert len(sink_values(kafka, sink)) == 102
    assert open_transactions(kafka, prefix) == []


def test_a_commit_whose_process_ends_right_after_it_leaves_its_completion_written_and_nothing_open(
        kafka: KafkaTestCluster) -> None:
    """pyspark ends its workers by os._exit: b0050cf left the completion to a thread that died with the process
    (the decision stayed without its completion, its coordinator transaction open until its timeout)."""
    topic = kafka.create_topic(2)
    tag = uuid.uuid4().hex[:8]
    prefix, log_topic = f"exit-{tag}", f"_decisions-{tag}"
    done = subprocess.run([sys.executable, "-m", "tests.harness.commit_then_exit", kafka.bootstrap_servers, topic, prefix,
                           log_topic], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    options = parse_writer_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": topic,
                                    "transactional.id.prefix": prefix, "decisionlogtopic": log_topic}, streaming=True)
    coordinator_id = coordinator_transactional_id(prefix)
    with open_session(options.connection) as session:
        assert session.describe([coordinator_id])[coordinator_id].state == TxnState.COMPLETE_COMMIT
    assert open_transactions(kafka, prefix) == []
    last = KafkaDecisionLog(options).last(prefix)
    assert last is not None and last.kind == "complete" and last.input is not None and last.input.rows == 2
    assert sink_values(kafka, topic) == [b"a", b"b"]


def test_an_aggregating_stream_commits_its_consumer_group_from_sparks_offset_log(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """``groupBy("key").count()`` carries no source offsets: the group gets each micro-batch's end offsets from the
    checkpoint's offset log, inside the decision (b0050cf refused the query: source_topic is missing)."""
    source, sink = kafka.create_topic(2, "src"), kafka.create_topic(1, "sink")
    group, prefix = f"counts-{uuid.uuid4().hex[:6]}", f"counts-{uuid.uuid4().hex[:6]}"

    def run_counts() -> None:
        counts = (spark.readStream.format("kafka_eos").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
                  .option("subscribe", source).option("startingOffsets", "earliest").load()
                  .groupBy("key").count().selectExpr("key", "CAST(count AS STRING) AS value"))
        query = (counts.writeStream.format("kafka_eos").outputMode("complete")
                 .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", sink)
                 .option("transactional.id.prefix", prefix).option("consumerGroup", group)
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()

    kafka.produce_plain(source, [Sent(i % 2, f"k{i % 3}".encode(), b"x") for i in range(30)])
    run_counts()
    assert kafka.group_offsets(group, source) == {0: 15, 1: 15}
    kafka.produce_plain(source, [Sent(0, b"k9", b"x") for _ in range(4)])
    run_counts()
    assert kafka.group_offsets(group, source) == {0: 19, 1: 15}
    kafka.wait_until_stable(sink)
    last = {r.key: r.value for r in kafka.read_committed(sink)}  # the last count of each key wins
    assert last == {b"k0": b"10", b"k1": b"10", b"k2": b"10", b"k9": b"4"}
    assert open_transactions(kafka, prefix) == []


def test_a_micro_batch_planned_again_over_as_many_other_records_is_told_by_its_source_columns(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """Found by the operator model (PLAY_REPLAN_TOLD_BY_SOURCE_COLUMNS_ONLY): the query's checkpoint is set by
    spark.sql.streaming.checkpointLocation, not as an option of the writer, so the sink cannot read its offset log;
    its rows carry source columns. Batch 0 wrote records 0-9; retention removed them; offsets/0 is deleted and the
    query restarted: batch 0 is planned again over records 10-19, as many rows. b0050cf compared the row counts alone,
    took it for the replay and lost records 10-19, silently; the source columns tell it apart."""
    source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    root, name, prefix = tmp_path / "checkpoints", f"columns_{uuid.uuid4().hex[:6]}", f"columns-{uuid.uuid4().hex[:6]}"

    def run_with_source_columns() -> None:
        run_named(spark, kafka, source, sink, name, prefix,
                  ("key", "value", "topic AS source_topic", "partition AS source_partition", "offset AS source_offset"))

    spark.conf.set("spark.sql.streaming.checkpointLocation", str(root))
    try:
        produce(kafka, source, 0, 10)
        run_with_source_columns()
        assert (root / name / "offsets" / "0").exists()
        produce(kafka, source, 10, 10)
        kafka.delete_records(source, {0: 10})
        forget_last_batch(root / name, 0)
        with pytest.raises(StreamingQueryException, match=REPLANNED) as refused:
            run_with_source_columns()
        assert "its source offsets differ" in str(refused.value)
        assert commit_outcome(refused.value) is CommitOutcome.REFUSED
    finally:
        spark.conf.unset("spark.sql.streaming.checkpointLocation")
    assert sink_values(kafka, sink) == values(0, 10)  # nothing of the refused run is visible
    assert open_transactions(kafka, prefix) == []


def test_a_micro_batch_planned_again_over_as_many_other_records_under_the_sessions_checkpoint_is_told_by_its_offset_log(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """Issue 62's first case: the checkpoint is set by spark.sql.streaming.checkpointLocation and the query's name (not
    an option of the writer) and the rows carry no source columns; maxOffsetsPerTrigger 100; batch 0 was decided over
    50 + 50 records of two partitions; 40 more arrive on partition 1; offsets/0 and commits/0 are deleted to reprocess
    it. Spark plans batch 0 again over 100 other records (35 + 65): 6692562 compared the row counts, took it for the
    replay and lost 15 records while writing 15 twice, silently. The tasks find the checkpoint from the session's conf
    and the query's name, so the offset log tells them apart (where it cannot be read, the rows' digest does)."""
    source, sink = kafka.create_topic(2, "src"), kafka.create_topic(2, "sink")
    root, name, prefix = tmp_path / "checkpoints", f"digest_{uuid.uuid4().hex[:6]}", f"digest-{uuid.uuid4().hex[:6]}"

    def produce_to(partition: int, first: int, count: int) -> None:
        kafka.produce_plain(source, [Sent(partition, f"k{i}".encode(), f"v{i}".encode()) for i in range(first, first + count)])

    def run_capped() -> None:
        run_named(spark, kafka, source, sink, name, prefix, ("key", "value"), maxOffsetsPerTrigger="100")

    spark.conf.set("spark.sql.streaming.checkpointLocation", str(root))
    try:
        produce_to(0, 0, 50)
        produce_to(1, 50, 50)
        run_capped()
        assert not (root / name / "offsets" / "1").exists()  # batch 0 alone
        produce_to(1, 100, 40)
        forget_last_batch(root / name, 0)
        with pytest.raises(StreamingQueryException, match=REPLANNED) as refused:
            run_capped()
        message = str(refused.value)
        assert "its source offsets differ" in message, message[-2000:]
        assert commit_outcome(refused.value) is CommitOutcome.REFUSED
    finally:
        spark.conf.unset("spark.sql.streaming.checkpointLocation")
    assert sink_values(kafka, sink) == values(0, 100)  # nothing of the refused run is visible
    assert open_transactions(kafka, prefix) == []


def test_a_replay_of_a_query_that_is_not_a_function_of_its_input_under_the_sessions_checkpoint_writes_nothing_more(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """A query with a uuid() column under the session's checkpoint: its driver died after the sink's commit, before
    Spark's commit log (commits/0 deleted), so Spark replays batch 0 over the same offsets, with other rows. The rows'
    digest alone would refuse it; the offset log, found from the session's conf and the query's name, proves the same
    input: the decided output stands and the replay writes nothing more. (A current_timestamp() column is no such
    query: Spark takes it from the micro-batch's timestamp in the offset log, the same in a replay.)"""
    source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    root, name, prefix = tmp_path / "checkpoints", f"clock_{uuid.uuid4().hex[:6]}", f"clock-{uuid.uuid4().hex[:6]}"
    spark.conf.set("spark.sql.streaming.checkpointLocation", str(root))
    try:
        produce(kafka, source, 0, 10)
        stamped = ("key", "concat(value, '@', uuid()) AS value")
        run_named(spark, kafka, source, sink, name, prefix, stamped)
        first = sink_values(kafka, sink)
        (root / name / "commits" / "0").unlink()
        (root / name / "commits" / ".0.crc").unlink(missing_ok=True)
        run_named(spark, kafka, source, sink, name, prefix, stamped)
        assert (root / name / "commits" / "0").exists(), "Spark replayed batch 0 and committed it"
    finally:
        spark.conf.unset("spark.sql.streaming.checkpointLocation")
    assert len(first) == 10 and sink_values(kafka, sink) == first
    assert open_transactions(kafka, prefix) == []


def test_a_write_id_re_run_over_as_many_other_rows_is_refused_and_over_the_same_rows_in_another_order_writes_nothing(
        spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """Issue 62's second case: a batch job re-run with its writeId after an upstream fix changed its 100 rows, not
    their number. 6692562 reported success and wrote nothing: the fix was silently dropped."""
    sink = kafka.create_topic(2, "sink")
    prefix = f"backfill-{uuid.uuid4().hex[:6]}"

    def write(expression: str, write_id: str, partitions: int = 3) -> None:
        (spark.range(100).selectExpr(f"{expression} AS value").repartition(partitions).write.format("kafka_eos")
         .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", sink)
         .option("transactional.id.prefix", prefix).option("writeId", write_id).mode("append").save())

    write("CAST(id AS STRING)", "2026-11-01")
    write("CAST(id AS STRING)", "2026-11-01", partitions=5)  # the same rows, split and ordered otherwise: a no-op
    assert sink_values(kafka, sink) == sorted(str(i).encode() for i in range(100))
    with pytest.raises(Exception, match="writeId 2026-11-01 is committed over 100 rows, and this run's 100 rows are other rows"):
        write("CONCAT('fixed-', CAST(id AS STRING))", "2026-11-01")
    assert len(sink_values(kafka, sink)) == 100
    write("CONCAT('fixed-', CAST(id AS STRING))", "2026-11-01-corrected")  # the fix the refusal names
    assert len(sink_values(kafka, sink)) == 200
    assert open_transactions(kafka, prefix) == []
