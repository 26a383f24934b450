"""Offsets that moved below where a query stands: never a silent success.

With failOnDataLoss=true (the default) a loud error names the topic, the partition, both offsets
and the option; with false a warning, then a read from the partition's new earliest offset, so
that the records it holds now arrive.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.datasource import ReadAllAvailable

from spark_kafka_eos._internal.read.admission_stream_reader import KafkaEosStreamReader
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos._internal.read.reader import StreamOffset
from spark_kafka_eos.errors import KafkaEosDataLossError
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.spark import kafka_eos
from tests.harness.stream import parquet_values, stream, stream_reader, to_parquet

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

# One quick second look at a log end below the position (a real broker answers the same).
QUICK_RECHECK = {"fetchOffset.retryIntervalMs": "10"}


def fill(kafka: KafkaTestCluster, topic: str, count: int, tag: str, partition: int = 0) -> list[bytes]:
    sent = kafka.produce_plain(topic, [Sent(partition, None, f"{tag}-{i:03d}".encode()) for i in range(count)])
    return [r.value or b"" for r in sent]


def offsets_of(reader_offsets: dict[str, dict[str, int]], topic: str) -> dict[int, int]:
    return {int(p): o for p, o in reader_offsets[topic].items()}


def test_a_topic_recreated_while_the_query_was_down(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """The issue's scenario: 50 records read with AvailableNow and a checkpoint; the topic is
    re-created with 20 new records; the query restarts from its checkpoint."""
    topic = kafka.create_topic(1)
    old = fill(kafka, topic, 50, "old")
    query = to_parquet(stream(spark, kafka, subscribe=topic, **QUICK_RECHECK), tmp_path, "q", availableNow=True)
    assert query.awaitTermination(120)
    assert parquet_values(spark, tmp_path, "q") == old
    kafka.recreate_topic(topic)
    new = fill(kafka, topic, 20, "new")

    query = to_parquet(stream(spark, kafka, subscribe=topic, **QUICK_RECHECK), tmp_path, "q", availableNow=True)
    with pytest.raises(StreamingQueryException) as failure:
        query.awaitTermination(120)
    message = str(failure.value)
    for fragment in (f"Topic {topic} was deleted and re-created: its id was", "failOnDataLoss=false"):
        assert fragment in message
    assert parquet_values(spark, tmp_path, "q") == old

    lenient = stream(spark, kafka, subscribe=topic, failOnDataLoss="false", **QUICK_RECHECK)
    query = to_parquet(lenient, tmp_path, "q", availableNow=True)
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert parquet_values(spark, tmp_path, "q") == sorted(new + old)


def test_a_topic_recreated_with_fewer_partitions(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(3)
    for p in range(3):
        fill(kafka, topic, 5, f"old{p}", partition=p)
    strict = stream_reader(kafka, subscribe=topic, **QUICK_RECHECK)
    lenient = stream_reader(kafka, subscribe=topic, failOnDataLoss="false", **QUICK_RECHECK)
    start = strict.initialOffset()
    end = strict.latestOffset(start, ReadAllAvailable())
    assert offsets_of(end, topic) == {0: 5, 1: 5, 2: 5}
    kafka.recreate_topic(topic, 1)
    fill(kafka, topic, 2, "new")

    with pytest.raises(KafkaEosDataLossError, match=rf"{topic}-1 \(the query stands at offset 5\).*failOnDataLoss=false"):
        strict.latestOffset(end, ReadAllAvailable())
    after = lenient.latestOffset(end, ReadAllAvailable())
    assert offsets_of(after, topic) == {0: 2}
    assert [(r.partition, r.start, r.end) for r in lenient.partitions(end, after)] == [(0, 0, 2)]


def test_a_log_that_moved_back_below_the_position(kafka: KafkaTestCluster) -> None:
    """A topic re-created and refilled to a smaller offset, also while the first batch after it is planned but not yet
    run: told by its id before its offsets (truncation keeps the id: test_a_given_offset_past_the_end takes that path)."""
    topic = kafka.create_topic(1)
    fill(kafka, topic, 10, "old")
    strict = stream_reader(kafka, subscribe=topic, **QUICK_RECHECK)
    lenient = stream_reader(kafka, subscribe=topic, failOnDataLoss="false", **QUICK_RECHECK)
    position = strict.latestOffset(strict.initialOffset(), ReadAllAvailable())
    kafka.recreate_topic(topic)
    fill(kafka, topic, 4, "new")

    with pytest.raises(KafkaEosDataLossError, match=rf"Topic {topic} was deleted and re-created: its id was .* when the query last planned"):
        strict.latestOffset(position, ReadAllAvailable())
    end = lenient.latestOffset(position, ReadAllAvailable())
    assert offsets_of(end, topic) == {0: 4}
    # A batch whose end lies below its start (planned by the lenient run, replayed after a restart).
    with pytest.raises(KafkaEosDataLossError, match=rf"Topic {topic} was deleted and re-created: its id was .* when the micro-batch before"):
        strict.partitions(position, end)
    # Records arriving between planning and partitions() lift the log end past the old position:
    # the batch the lenient reader planned still reads the partition from its earliest offset.
    fill(kafka, topic, 8, "more")
    ranges = lenient.partitions(position, end)
    assert [(r.start, r.end) for r in ranges] == [(0, 4)]
    assert [v for r in ranges for b in lenient.read(r) for v in b.column("value").to_pylist()] == [f"new-{i:03d}".encode() for i in range(4)]


def test_a_given_offset_past_the_end(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    fill(kafka, topic, 10, "v")
    past = f'{{"{topic}":{{"0":25}}}}'
    strict = stream_reader(kafka, subscribe=topic, startingOffsets=past, **QUICK_RECHECK)
    with pytest.raises(KafkaEosDataLossError, match="stands at offset 25, but the partition's log now ends at offset 10"):
        strict.latestOffset(strict.initialOffset(), ReadAllAvailable())
    lenient = stream_reader(kafka, subscribe=topic, startingOffsets=past, failOnDataLoss="false", **QUICK_RECHECK)
    assert offsets_of(lenient.latestOffset(lenient.initialOffset(), ReadAllAvailable()), topic) == {0: 10}
    # The same in a batch read: an error naming both offsets, or all of what the partition holds now.
    with pytest.raises(Exception, match="stands at offset 25, but the partition's log now ends at offset 10"):
        kafka_eos(spark, kafka, subscribe=topic, startingOffsets=past).collect()
    assert kafka_eos(spark, kafka, subscribe=topic, startingOffsets=past, failOnDataLoss="false").count() == 10


def test_a_start_inside_an_open_transaction_waits_and_is_not_data_loss(kafka: KafkaTestCluster) -> None:
    """Past the LSO but inside the log: the transaction is waited out, no false data loss."""
    topic = kafka.create_topic(1)
    fill(kafka, topic, 3, "v")
    txn = kafka.open_transaction(topic, [Sent(0, None, b"t1"), Sent(0, None, b"t2")])
    inside = f'{{"{topic}":{{"0":4}}}}'
    reader = stream_reader(kafka, subscribe=topic, startingOffsets=inside, **QUICK_RECHECK)
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadAllAvailable()) == start
    txn.commit()
    assert offsets_of(reader.latestOffset(start, ReadAllAvailable()), topic) == {0: 6}


def test_out_of_range_past_the_log_end_in_a_task(kafka: KafkaTestCluster) -> None:
    """A range planned before its partition's log moved back: the task reports it at once instead
    of retrying until kafkaConsumer.pollTimeoutMs and blaming the network."""
    topic = kafka.create_topic(1)
    fill(kafka, topic, 3, "v")
    planned = OffsetRange(topic, 0, 20, 30)
    lenient = stream_reader(kafka, subscribe=topic, failOnDataLoss="false", **{"kafkaConsumer.pollTimeoutMs": "20000"})
    assert list(lenient.read(planned)) == []
    strict = stream_reader(kafka, subscribe=topic, **{"kafkaConsumer.pollTimeoutMs": "20000"})
    with pytest.raises(KafkaEosDataLossError, match="stands at offset 20, but the partition's log now ends at offset 3"):
        list(strict.read(planned))


def a_partition_added_with_5_records(kafka: KafkaTestCluster) -> tuple[str, KafkaEosStreamReader, KafkaEosStreamReader, StreamOffset]:
    """A topic whose partition 1 was added, with 5 records, after a strict and a lenient (failOnDataLoss=false)
    stream reader took their initial offset: (topic, strict, lenient, that offset)."""
    topic = kafka.create_topic(1)
    strict = stream_reader(kafka, subscribe=topic)
    lenient = stream_reader(kafka, subscribe=topic, failOnDataLoss="false")
    start = strict.initialOffset()
    kafka.add_partitions(topic, 2)
    fill(kafka, topic, 5, "p1", partition=1)
    return topic, strict, lenient, start


def test_records_deleted_below_the_position_of_an_added_partition(kafka: KafkaTestCluster) -> None:
    """A partition added while the query was down, whose first records were deleted before the
    query saw it: Spark reports it ("Added partition ... starts from 3 instead of 0")."""
    topic, strict, lenient, start = a_partition_added_with_5_records(kafka)
    kafka.admin.delete_records([TopicPartition(topic, 1, 3)])[TopicPartition(topic, 1, 3)].result(30)
    with pytest.raises(KafkaEosDataLossError, match=rf"{topic}-1 appeared .* offsets 0 to 2 were deleted"):
        strict.latestOffset(start, ReadAllAvailable())
    end = lenient.latestOffset(start, ReadAllAvailable())
    assert offsets_of(end, topic) == {0: 0, 1: 5}
    assert [(r.partition, r.start, r.end) for r in lenient.partitions(start, end)] == [(1, 3, 5)]


def test_records_of_an_added_partition_deleted_after_its_batch_was_planned(kafka: KafkaTestCluster) -> None:
    """The micro-batch's end names a partition its start does not (added since), whose earliest offset was 0
    when the end was planned; its first records are deleted before the batch's partitions are planned.
    Spark reports it when it plans the ranges ("Added partition ... starts from 3 instead of 0")."""
    topic, strict, lenient, start = a_partition_added_with_5_records(kafka)
    end = strict.latestOffset(start, ReadAllAvailable())
    assert offsets_of(lenient.latestOffset(lenient.initialOffset(), ReadAllAvailable()), topic) == offsets_of(end, topic) == {0: 0, 1: 5}
    kafka.delete_records(topic, {1: 3})
    with pytest.raises(KafkaEosDataLossError, match=rf"Added partition {topic}-1 starts from 3 instead of 0: its offsets 0 to 2"):
        strict.partitions(start, end)
    assert [(r.partition, r.start, r.end) for r in lenient.partitions(start, end)] == [(1, 3, 5)]
    # Every planned record of it deleted, and more: nothing to read, still reported.
    fill(kafka, topic, 2, "p1-late", partition=1)
    kafka.delete_records(topic, {1: 6})
    with pytest.raises(KafkaEosDataLossError, match=rf"Added partition {topic}-1 starts from 6 instead of 0"):
        strict.partitions(start, end)
    assert list(lenient.partitions(start, end)) == []


def test_a_replayed_micro_batch_whose_added_partition_lost_its_first_records(
    spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    """Through Spark: batch 1 is planned with a partition added since batch 0 (its end, in the checkpoint,
    names offsets 0 to 5 of it) and fails before it commits; deleteRecords then removes offsets 0 to 2 of
    the new partition. The restarted query replays batch 1: with failOnDataLoss=true it fails, as Spark's
    source does ("Added partition ... starts from 3 instead of 0"); with false it reads the rest, warned."""
    topic = kafka.create_topic(1)
    before = fill(kafka, topic, 2, "p0")
    checkpoint = tmp_path / "checkpoint"
    seen: list[tuple[int, bytes]] = []

    def run(on_batch: Callable[[DataFrame, int], None], **options: str) -> StreamingQuery:
        df = stream(spark, kafka, subscribe=topic, **options)
        writer = df.writeStream.foreachBatch(on_batch).option("checkpointLocation", str(checkpoint))
        return writer.trigger(availableNow=True).start()

    def collect(df: DataFrame, batch_id: int) -> None:
        seen.extend((batch_id, bytes(r.value)) for r in df.collect())

    def crash(df: DataFrame, batch_id: int) -> None:
        raise RuntimeError(f"crash in batch {batch_id}")

    first = run(collect)
    first.awaitTermination(120)
    assert first.exception() is None and sorted(seen) == [(0, v) for v in before]
    kafka.add_partitions(topic, 2)
    added = fill(kafka, topic, 5, "p1", partition=1)
    later = fill(kafka, topic, 1, "p0-later")
    with pytest.raises(StreamingQueryException, match="crash in batch 1"):
        run(crash).awaitTermination(120)
    assert (checkpoint / "offsets" / "1").exists() and not (checkpoint / "commits" / "1").exists()
    kafka.delete_records(topic, {1: 3})

    seen.clear()
    with pytest.raises(StreamingQueryException, match=rf"Added partition {topic}-1 starts from 3 instead of 0"):
        run(collect).awaitTermination(120)
    assert seen == []
    query = run(collect, failOnDataLoss="false")
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(seen) == sorted((1, v) for v in later + added[3:])


def commit_group_offset(kafka: KafkaTestCluster, group: str, topic: str, offset: int) -> None:
    committer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        committer.close()


def test_a_group_offset_past_the_log_end_is_data_loss(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """startingOffsets=group after the topic was re-created: the group stands at 10, the log ends
    at 3. Clamping the start to the end would skip the 3 new records without a word."""
    topic, group = kafka.create_topic(1), f"g-{uuid.uuid4().hex[:8]}"
    kafka.produce_plain(topic, [Sent(0, None, b"new-%d" % i) for i in range(3)])
    commit_group_offset(kafka, group, topic, 10)
    options = {"subscribe": topic, "startingOffsets": "group", "consumerGroup": group}
    # Spark wraps the driver's error in an AnalysisException; its message is kafka_eos's.
    with pytest.raises(Exception, match=rf"KafkaEosDataLossError.*{topic}-0 .*stands at offset 10, but the partition's log now ends at offset 3"):
        kafka_eos(spark, kafka, **options).collect()
    lenient = kafka_eos(spark, kafka, failOnDataLoss="false", **options)
    assert sorted(bytes(r.value) for r in lenient.collect()) == [b"new-0", b"new-1", b"new-2"]
    strict_stream = stream_reader(kafka, **options)
    with pytest.raises(KafkaEosDataLossError, match=rf"{topic}-0.*failOnDataLoss"):
        strict_stream.latestOffset(strict_stream.initialOffset(), ReadAllAvailable())
    lenient_stream = stream_reader(kafka, failOnDataLoss="false", **options)
    start = lenient_stream.initialOffset()
    end = lenient_stream.latestOffset(start, ReadAllAvailable())
    assert [(r.start, r.end) for r in lenient_stream.partitions(start, end)] == [(0, 3)]


def test_a_group_offset_inside_an_open_transaction_reads_nothing_yet(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic, group = kafka.create_topic(1), f"g-{uuid.uuid4().hex[:8]}"
    kafka.produce_plain(topic, [Sent(0, None, b"done")])
    pending = kafka.open_transaction(topic, [Sent(0, None, b"pending")] * 3)
    commit_group_offset(kafka, group, topic, 3)  # inside the open transaction
    try:
        df = kafka_eos(spark, kafka, subscribe=topic, startingOffsets="group", consumerGroup=group)
        assert df.collect() == []
    finally:
        pending.abort()


@pytest.mark.parametrize("engine", ["native", "python"])
def test_out_of_range_is_confirmed_with_the_leader_before_it_counts(kafka: KafkaTestCluster, engine: str) -> None:
    """A range past the log end whose records arrive within the confirmation window (a new leader whose high
    watermark lagged its predecessor's): the task reads them, nothing is reported lost. Before, one watermark answer
    decided: the range was skipped (false) or failed (true)."""
    topic = kafka.create_topic(1)
    fill(kafka, topic, 3, "v")
    planned = OffsetRange(topic, 0, 5, 8)
    strict = stream_reader(kafka, subscribe=topic, readEngine=engine, **{"kafkaConsumer.pollTimeoutMs": "20000"})
    late = threading.Timer(2.0, lambda: fill(kafka, topic, 5, "late"))
    late.start()
    try:
        read = [v for b in strict.read(planned) for v in b.column("value").to_pylist()]
    finally:
        late.join()
    assert read == [f"late-{i:03d}".encode() for i in range(2, 5)]
