"""Read-path edge cases where a reader can skip or duplicate records without a word."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.partition_reader import read_offset_range
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos._internal.read.reader import ORIGIN_KEY
from spark_kafka_eos.errors import KafkaEosDataLossError
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.spark import kafka_eos
from tests.harness.stream import positions, stream, stream_reader

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def produce(kafka: KafkaTestCluster, topic: str, count: int, partition: int = 0) -> None:
    kafka.produce_plain(topic, [Sent(partition, None, b"x") for _ in range(count)])


def test_the_initial_offset_is_resolved_once(kafka: KafkaTestCluster) -> None:
    """Spark asks for it in getStartOffset and again in runBatch; records that arrive in between
    must not move a `latest` start past them."""
    topic = kafka.create_topic(1)
    produce(kafka, topic, 3)
    reader = stream_reader(kafka, subscribe=topic, startingOffsets="latest")
    first = reader.initialOffset()
    assert positions(first) == {topic: {"0": 3}}
    produce(kafka, topic, 2)
    assert reader.initialOffset() == first
    assert positions(reader.latestOffset(first, ReadAllAvailable())) == {topic: {"0": 5}, ORIGIN_KEY: positions(first)}


def test_a_restart_after_retention_passed_a_committed_first_batch_is_not_data_loss(kafka: KafkaTestCluster) -> None:
    """On a restart Spark hands the checkpoint's last end to the reader as ``partitions(end, end)``
    (setLatestSeenOffset) and throws the plan away. When that end is a committed first batch's, it
    carries the batch's origin; retention that since deleted the batch's records is no data loss."""
    topic = kafka.create_topic(1)
    produce(kafka, topic, 10)
    first_run = stream_reader(kafka, subscribe=topic)
    end = first_run.latestOffset(first_run.initialOffset(), ReadAllAvailable())
    assert positions(end) == {topic: {"0": 10}, ORIGIN_KEY: {topic: {"0": 0}}}
    kafka.delete_records(topic, {0: 10})  # batch 0 committed; retention passed it while the query was down
    assert stream_reader(kafka, subscribe=topic).partitions(end, end) == []


def test_a_first_batch_replayed_after_a_restart_keeps_its_start(kafka: KafkaTestCluster) -> None:
    """After a crash before batch 0 commits, Spark replays it with its planned end (from the
    checkpoint) and a start from initialOffset() resolved anew. A `latest` start now lies past
    the records batch 0 was planned with; the end offset records the first start, so they are
    read, as Spark's own source (which keeps its initial offsets in the checkpoint) reads them."""
    topic = kafka.create_topic(1)
    produce(kafka, topic, 3)
    first_run = stream_reader(kafka, subscribe=topic, startingOffsets="latest")
    start = first_run.initialOffset()
    produce(kafka, topic, 2)
    planned_end = first_run.latestOffset(start, ReadAllAvailable())
    assert (positions(start), positions(planned_end)) == ({topic: {"0": 3}}, {topic: {"0": 5}, ORIGIN_KEY: {topic: {"0": 3}}})
    produce(kafka, topic, 4)  # ... the driver crashes, records keep arriving, the query restarts
    restarted = stream_reader(kafka, subscribe=topic, startingOffsets="latest")
    assert positions(restarted.initialOffset()) == {topic: {"0": 9}}
    replayed = restarted.partitions(restarted.initialOffset(), planned_end)
    assert [(r.topic, r.partition, r.start, r.end) for r in replayed] == [(topic, 0, 3, 5)]
    # Batch 1 starts at batch 0's end; the recorded origin is not carried further.
    assert positions(restarted.latestOffset(planned_end, ReadAllAvailable())) == {topic: {"0": 9}}


def test_a_first_batch_replayed_after_retention_moved_its_start(kafka: KafkaTestCluster) -> None:
    """`earliest`, resolved anew after the crash, has moved past records that retention deleted
    meanwhile: that is data loss, reported as Spark's source reports it, never skipped."""
    topic = kafka.create_topic(1)
    produce(kafka, topic, 5)
    first_run = stream_reader(kafka, subscribe=topic)
    planned_end = first_run.latestOffset(first_run.initialOffset(), ReadAllAvailable())
    kafka.admin.delete_records([TopicPartition(topic, 0, 3)])[TopicPartition(topic, 0, 3)].result(30)
    strict = stream_reader(kafka, subscribe=topic)
    assert positions(strict.initialOffset()) == {topic: {"0": 3}}
    with pytest.raises(KafkaEosDataLossError, match=rf"{topic}-0.*offsets 0 to 2.*failOnDataLoss"):
        strict.partitions(strict.initialOffset(), planned_end)
    lenient = stream_reader(kafka, subscribe=topic, failOnDataLoss="false")
    replayed = lenient.partitions(lenient.initialOffset(), planned_end)
    assert [(r.start, r.end) for r in replayed] == [(3, 5)]


def test_a_first_batch_of_an_older_checkpoint_replayed_with_a_start_resolved_again(kafka: KafkaTestCluster) -> None:
    """An end offset written before origins were recorded cannot say where batch 0 started: a
    `latest` start resolved again past the planned end is reported, never an empty batch."""
    topic = kafka.create_topic(1)
    produce(kafka, topic, 3)
    first_run = stream_reader(kafka, subscribe=topic, startingOffsets="latest")
    start = first_run.initialOffset()
    produce(kafka, topic, 2)
    planned_end = {t: p for t, p in first_run.latestOffset(start, ReadAllAvailable()).items() if t != ORIGIN_KEY}
    assert positions(planned_end) == {topic: {"0": 5}}
    produce(kafka, topic, 4)
    strict = stream_reader(kafka, subscribe=topic, startingOffsets="latest")
    restart = strict.initialOffset()
    assert positions(restart) == {topic: {"0": 9}}
    with pytest.raises(KafkaEosDataLossError, match=rf"{topic}-0 .*planned to end at offset 5, but its start, resolved again after a restart, is offset 9"):
        strict.partitions(restart, planned_end)
    lenient = stream_reader(kafka, subscribe=topic, startingOffsets="latest", failOnDataLoss="false")
    assert lenient.partitions(lenient.initialOffset(), planned_end) == []


def test_a_topic_or_partition_named_twice_is_read_once(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(2)
    produce(kafka, topic, 3, partition=0)
    produce(kafka, topic, 2, partition=1)
    assert kafka_eos(spark, kafka, subscribe=f"{topic},{topic}").count() == 5
    assert kafka_eos(spark, kafka, assign=f'{{"{topic}":[0,0,1]}}').count() == 5


def test_available_now_reads_a_backlog_below_min_offsets_per_trigger(kafka: KafkaTestCluster) -> None:
    """Trigger.AvailableNow passes the default limit (ReadMinRows here); waiting for the minimum
    would end the run with the backlog, or its last chunk, unread."""
    topic = kafka.create_topic(1)
    produce(kafka, topic, 10)
    reader = stream_reader(kafka, subscribe=topic, minOffsetsPerTrigger="50", maxTriggerDelay="1h")
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    assert positions(reader.latestOffset(start, ReadMinRows(50))) == {topic: {"0": 10}, ORIGIN_KEY: positions(start)}
    # With a maximum too, the last chunk below the minimum is not left behind.
    produce(kafka, topic, 50)
    bounded = stream_reader(kafka, subscribe=topic, minOffsetsPerTrigger="50", maxOffsetsPerTrigger="50", maxTriggerDelay="1h")
    bounded.prepareForTriggerAvailableNow()
    first = bounded.latestOffset(start, ReadMaxRows(50))
    assert positions(first) == {topic: {"0": 50}}
    assert positions(bounded.latestOffset(first, ReadMaxRows(50))) == {topic: {"0": 60}}


def test_a_deleted_topic_planned_in_an_uncommitted_batch(kafka: KafkaTestCluster) -> None:
    """A batch planned with a topic that is deleted before it runs (e.g. across a restart): with
    failOnDataLoss=false the rest is read, instead of failing at every restart."""
    keep, doomed = kafka.create_topic(1), kafka.create_topic(1)
    produce(kafka, keep, 2)
    produce(kafka, doomed, 2)
    strict = stream_reader(kafka, subscribe=f"{keep},{doomed}")
    lenient = stream_reader(kafka, subscribe=f"{keep},{doomed}", failOnDataLoss="false")
    start = strict.initialOffset()
    end = strict.latestOffset(start, ReadAllAvailable())
    kafka.delete_topic(doomed)
    with pytest.raises(KafkaEosDataLossError, match=rf"{doomed}-0 \(planned up to offsets 2\)"):
        strict.partitions(start, end)
    assert [(r.topic, r.start, r.end) for r in lenient.partitions(start, end)] == [(keep, 0, 2)]


def test_an_assigned_partition_that_vanished_follows_fail_on_data_loss(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(2)
    produce(kafka, topic, 2, partition=0)
    assign = f'{{"{topic}":[0,1]}}'
    strict = stream_reader(kafka, assign=assign)
    lenient = stream_reader(kafka, assign=assign, failOnDataLoss="false")
    start = strict.initialOffset()
    kafka.recreate_topic(topic, 1)
    produce(kafka, topic, 2, partition=0)
    with pytest.raises(KafkaEosDataLossError, match=rf"{topic}-1 \(the query stands at offset 0\)"):
        strict.latestOffset(start, ReadAllAvailable())
    assert positions(lenient.latestOffset(start, ReadAllAvailable())) == {topic: {"0": 2}}


def test_max_bytes_per_batch_counts_header_bytes(kafka: KafkaTestCluster, read_engine: str) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, b"v", headers=(("h", b"x" * 400),)) for _ in range(6)])
    raw = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "includeheaders": "true", "maxbytesperbatch": "1000",
           "readEngine": read_engine}
    options = parse_reader_options(raw, streaming=False)
    batches = list(read_offset_range(options, OffsetRange(topic, 0, 0, 6)))
    # 401 bytes a record: a batch is full after three of them.
    assert [b.num_rows for b in batches] == [3, 3]


def test_a_query_that_failed_in_its_first_batch_is_replayed_from_that_batchs_start(
    spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    """The whole path through Spark: batch 0 is planned (its end is in the checkpoint) and fails
    before it commits; retention then deletes its first records. The restarted query must not
    replay batch 0 from the new earliest offset as if nothing happened."""
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, b"v%d" % i) for i in range(5)])
    checkpoint = tmp_path / "checkpoint"

    def run(on_batch: Callable[[DataFrame, int], None], **options: str) -> StreamingQuery:
        df = stream(spark, kafka, subscribe=topic, **options)
        writer = df.writeStream.foreachBatch(on_batch).option("checkpointLocation", str(checkpoint))
        return writer.trigger(availableNow=True).start()

    def crash(df: DataFrame, batch_id: int) -> None:
        raise RuntimeError(f"crash in batch {batch_id}")

    with pytest.raises(StreamingQueryException, match="crash in batch 0"):
        run(crash).awaitTermination(120)
    assert (checkpoint / "offsets" / "0").exists() and not (checkpoint / "commits" / "0").exists()
    kafka.admin.delete_records([TopicPartition(topic, 0, 3)])[TopicPartition(topic, 0, 3)].result(30)

    seen: list[tuple[int, bytes]] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        seen.extend((batch_id, bytes(r.value)) for r in df.collect())

    with pytest.raises(StreamingQueryException, match=rf"{topic}-0: offsets 0 to 2 were deleted"):
        run(collect).awaitTermination(120)
    assert seen == []
    query = run(collect, failOnDataLoss="false")
    query.awaitTermination(120)
    assert query.exception() is None
    assert seen == [(0, b"v3"), (0, b"v4")]
