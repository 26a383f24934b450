"""spark.readStream.format("kafka_eos") on a real broker."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec
from pyspark.sql import SparkSession
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from spark_kafka_eos._internal.read.planner import OffsetRange, ranges_of
from spark_kafka_eos._internal.read.reader import ORIGIN_KEY
from spark_kafka_eos.errors import KafkaEosDataLossError
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.stream import positions, stream, stream_reader, to_memory, values

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_a_stream_waits_for_an_open_transaction_then_delivers_only_committed(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, b"a1"), Sent(0, None, b"a2")])
    txn = kafka.open_transaction(topic, [Sent(0, None, b"t1"), Sent(0, None, b"t2")])
    kafka.produce_plain(topic, [Sent(0, None, b"b1")])
    query, name = to_memory(stream(spark, kafka, subscribe=topic), tmp_path)
    try:
        query.processAllAvailable()
        # b1 is written, but it lies behind the open transaction: the LSO holds the stream.
        assert values(spark, name) == [b"a1", b"a2"]
        txn.commit()
        query.processAllAvailable()
        assert values(spark, name) == [b"a1", b"a2", b"b1", b"t1", b"t2"]
        kafka.open_transaction(topic, [Sent(0, None, b"aborted")]).abort()
        kafka.produce_plain(topic, [Sent(0, None, b"c1")])
        query.processAllAvailable()
        assert values(spark, name) == [b"a1", b"a2", b"b1", b"c1", b"t1", b"t2"]
        assert values(spark, name) == sorted(r.value or b"" for r in kafka.read_committed(topic))
    finally:
        query.stop()


def test_available_now_with_max_offsets_per_trigger(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    topic = kafka.create_topic(2)
    kafka.write_interleaved(topic, [0, 1], producers=2, transactions=3, records_per_transaction=10)
    committed = kafka.read_committed(topic)
    query, name = to_memory(stream(spark, kafka, subscribe=topic, maxOffsetsPerTrigger=25), tmp_path, availableNow=True)
    assert query.awaitTermination(180)
    per_batch = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    total_offsets = sum(kafka.offsets(topic, OffsetSpec.latest()).values())
    assert len(per_batch) >= -(-total_offsets // 25) and max(per_batch) <= 25
    assert values(spark, name) == sorted(r.value or b"" for r in committed)


def test_added_partitions_are_read_from_earliest(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, b"p0")])
    query, name = to_memory(stream(spark, kafka, subscribe=topic, startingOffsets="latest"), tmp_path)
    try:
        query.processAllAvailable()
        kafka.produce_plain(topic, [Sent(0, None, b"p0-later")])
        kafka.add_partitions(topic, 3)
        kafka.produce_plain(topic, [Sent(1, None, b"p1"), Sent(2, None, b"p2")])
        query.processAllAvailable()
        assert values(spark, name) == [b"p0-later", b"p1", b"p2"]
    finally:
        query.stop()


def test_read_limits_on_the_driver(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(2)
    kafka.produce_plain(topic, [Sent(p, None, b"x") for p in (0, 1) for _ in range(10)])
    reader = stream_reader(kafka, subscribe=topic, minOffsetsPerTrigger="50", maxTriggerDelay="1h")
    start = reader.initialOffset()
    assert positions(start) == {topic: {"0": 0, "1": 0}}
    # As in Spark, the first trigger of a run never waits (a restart reads its backlog at once) ...
    # The first batch's end also records the run's start (see test_reader_edge_cases).
    assert positions(reader.latestOffset(start, ReadMinRows(50))) == {topic: {"0": 10, "1": 10}, ORIGIN_KEY: positions(start)}
    # ... later ones wait for the minimum while the delay has not passed.
    assert reader.latestOffset(start, ReadMinRows(50)) == start
    assert positions(reader.reportLatestOffset()) == {topic: {"0": 10, "1": 10}}
    # The configured minimum holds with the engine's max limit too, but not for "everything".
    assert reader.latestOffset(start, ReadMaxRows(5)) == start
    assert positions(reader.latestOffset(start, ReadAllAvailable())) == {topic: {"0": 10, "1": 10}, ORIGIN_KEY: positions(start)}
    limited = stream_reader(kafka, subscribe=topic).latestOffset(start, ReadMaxRows(5))[topic]
    assert sorted(limited.values()) == [2, 3]
    impatient = stream_reader(kafka, subscribe=topic, minOffsetsPerTrigger="50", maxTriggerDelay="0ms")
    assert positions(impatient.latestOffset(start, ReadMinRows(50))) == {topic: {"0": 10, "1": 10}}
    assert positions(impatient.latestOffset(start, ReadMinRows(50))) == {topic: {"0": 10, "1": 10}}
    # The executor copy carries no admin client.
    assert b"AdminClient" not in pickle.dumps(reader)
    ranges = reader.partitions(start, {topic: {"0": 10, "1": 4}})
    assert [(r.partition, r.start, r.end) for planned in ranges for r in ranges_of(planned)] == [(0, 0, 10), (1, 0, 4)]  # type: ignore[arg-type]


def test_available_now_never_passes_the_target(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, b"before")])
    reader = stream_reader(kafka, subscribe=topic)
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    kafka.produce_plain(topic, [Sent(0, None, b"after")])
    end = reader.latestOffset(start, ReadAllAvailable())
    assert positions(end) == {topic: {"0": 1}, ORIGIN_KEY: positions(start)}
    assert reader.latestOffset(end, ReadAllAvailable()) == end


def test_a_deleted_topic_follows_fail_on_data_loss(kafka: KafkaTestCluster) -> None:
    keep, doomed = kafka.create_topic(1), kafka.create_topic(1)
    kafka.produce_plain(doomed, [Sent(0, None, b"x")])
    strict = stream_reader(kafka, subscribe=f"{keep},{doomed}")
    lenient = stream_reader(kafka, subscribe=f"{keep},{doomed}", failOnDataLoss="false")
    start = strict.initialOffset()
    kafka.delete_topic(doomed)
    with pytest.raises(KafkaEosDataLossError, match=f"{doomed}-0"):
        strict.latestOffset(start, ReadAllAvailable())
    assert positions(lenient.latestOffset(start, ReadAllAvailable())) == {keep: {"0": 0}}


def test_offsets_lost_to_retention_follow_fail_on_data_loss(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, f"v{i}".encode()) for i in range(10)])
    strict, lenient = stream_reader(kafka, subscribe=topic), stream_reader(kafka, subscribe=topic, failOnDataLoss="false")
    start = strict.initialOffset()
    end = strict.latestOffset(start, ReadAllAvailable())
    kafka.admin.delete_records([TopicPartition(topic, 0, 6)])[TopicPartition(topic, 0, 6)].result(30)
    with pytest.raises(KafkaEosDataLossError, match="offsets 0 to 5 were deleted"):
        strict.partitions(start, end)
    assert [(r.start, r.end) for r in lenient.partitions(start, end)] == [(6, 10)]
    # Deleted between planning and reading: the executor's range reader sees it too.
    planned_before_deletion = OffsetRange(topic, 0, 0, 10)
    rows = [o for b in lenient.read(planned_before_deletion) for o in b.column("offset").to_pylist()]
    assert rows == list(range(6, 10))
    with pytest.raises(KafkaEosDataLossError, match="no longer exists"):
        list(strict.read(planned_before_deletion))
