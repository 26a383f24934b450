"""Read-path edge cases where a reader can skip or duplicate records without a word."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from spark_kafka_eos.errors import KafkaEosDataLossError
from spark_kafka_eos.options import parse_reader_options
from spark_kafka_eos.read.partition_reader import read_offset_range
from spark_kafka_eos.read.planner import OffsetRange
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.spark import kafka_eos
from tests.harness.stream import stream_reader

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
    assert first == {topic: {"0": 3}}
    produce(kafka, topic, 2)
    assert reader.initialOffset() == first
    assert reader.latestOffset(first, ReadAllAvailable()) == {topic: {"0": 5}}


def test_a_first_batch_replayed_with_a_start_resolved_again(kafka: KafkaTestCluster) -> None:
    """After a crash before batch 0 commits, Spark replays it with its planned end and a start from
    initialOffset() again. A Python stream reader has no checkpoint to keep the first answer in, so
    a `latest` start may now lie past the planned end: never silently an empty batch."""
    topic = kafka.create_topic(1)
    produce(kafka, topic, 3)
    first_run = stream_reader(kafka, subscribe=topic, startingOffsets="latest")
    start = first_run.initialOffset()
    produce(kafka, topic, 2)
    planned_end = first_run.latestOffset(start, ReadAllAvailable())
    assert (start, planned_end) == ({topic: {"0": 3}}, {topic: {"0": 5}})
    produce(kafka, topic, 4)  # ... the driver crashes, records keep arriving, the query restarts
    strict = stream_reader(kafka, subscribe=topic, startingOffsets="latest")
    restart = strict.initialOffset()
    assert restart == {topic: {"0": 9}}
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
    assert reader.latestOffset(start, ReadMinRows(50)) == {topic: {"0": 10}}
    # With a maximum too, the last chunk below the minimum is not left behind.
    produce(kafka, topic, 50)
    bounded = stream_reader(kafka, subscribe=topic, minOffsetsPerTrigger="50", maxOffsetsPerTrigger="50", maxTriggerDelay="1h")
    bounded.prepareForTriggerAvailableNow()
    first = bounded.latestOffset(start, ReadMaxRows(50))
    assert first == {topic: {"0": 50}}
    assert bounded.latestOffset(first, ReadMaxRows(50)) == {topic: {"0": 60}}


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
    assert lenient.latestOffset(start, ReadAllAvailable()) == {topic: {"0": 2}}


def test_max_bytes_per_batch_counts_header_bytes(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, b"v", headers=(("h", b"x" * 400),)) for _ in range(6)])
    raw = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "includeheaders": "true", "maxbytesperbatch": "1000"}
    options = parse_reader_options(raw, streaming=False)
    batches = list(read_offset_range(options, OffsetRange(topic, 0, 0, 6)))
    # 401 bytes a record: a batch is full after three of them.
    assert [b.num_rows for b in batches] == [3, 3]
