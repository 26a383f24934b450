"""A topic is its id (KIP-516): a topic re-created under its name is told from the old one whatever its offsets say.

The case offsets alone cannot show: the new topic already holds more records than the query's old position, so
its log does not end below the position. Read on from there, its first records would never be read, with no
warning (Spark's own source does the same). Under failOnDataLoss=true the restart fails naming the topic and both
ids; under false the new topic is read from its earliest offset, once.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming.datasource import ReadAllAvailable

from spark_kafka_eos._internal.read.planner import OffsetRange, ranges_of
from spark_kafka_eos._internal.read.topic_identity import TOPIC_IDS_KEY
from spark_kafka_eos.errors import KafkaEosDataLossError
from tests.harness.kafka import KafkaTestCluster
from tests.harness.stream import parquet_values, stream, stream_reader, to_parquet
from tests.integration.read.test_reader_data_loss import QUICK_RECHECK, fill, offsets_of

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _topic_id(kafka: KafkaTestCluster, topic: str) -> str:
    reader = stream_reader(kafka, subscribe=topic)
    return reader.lookup.topic_ids([topic])[topic]


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_topic_recreated_past_the_position_while_the_query_was_down(spark: SparkSession, kafka: KafkaTestCluster,
                                                                     tmp_path: Path, engine: str) -> None:
    """50 records read; the topic re-created and filled with 70 (its log ends past the old position 50)."""
    topic = kafka.create_topic(1)
    old = fill(kafka, topic, 50, "old")
    options = {"subscribe": topic, "readEngine": engine, **QUICK_RECHECK}
    query = to_parquet(stream(spark, kafka, **options), tmp_path, "q", availableNow=True)
    assert query.awaitTermination(120)
    assert parquet_values(spark, tmp_path, "q") == old
    before = _topic_id(kafka, topic)
    kafka.recreate_topic(topic)
    new = fill(kafka, topic, 70, "new")
    after = _topic_id(kafka, topic)
    assert before != after

    query = to_parquet(stream(spark, kafka, **options), tmp_path, "q", availableNow=True)
    with pytest.raises(StreamingQueryException) as failure:
        query.awaitTermination(120)
    message = str(failure.value)
    for fragment in (f"Topic {topic} was deleted and re-created", before, after, "failOnDataLoss=false"):
        assert fragment in message, message[-2000:]
    assert parquet_values(spark, tmp_path, "q") == old

    query = to_parquet(stream(spark, kafka, failOnDataLoss="false", **options), tmp_path, "q", availableNow=True)
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert parquet_values(spark, tmp_path, "q") == sorted(old + new)


def test_an_offset_without_topic_ids_is_planned_as_before_and_the_next_carries_them(kafka: KafkaTestCluster) -> None:
    """A checkpoint written before ids were recorded keeps working: its offsets tell nothing of the topic's id, and
    the end planned from them records it."""
    topic = kafka.create_topic(1)
    fill(kafka, topic, 5, "a")
    reader = stream_reader(kafka, subscribe=topic, **QUICK_RECHECK)
    end = reader.latestOffset({topic: {"0": 2}}, ReadAllAvailable())
    assert offsets_of(end, topic) == {0: 5}
    assert end[TOPIC_IDS_KEY] == {topic: _topic_id(kafka, topic)}
    assert [(r.start, r.end) for p in reader.partitions({topic: {"0": 2}}, end) for r in ranges_of(p)] == [(2, 5)]


def test_a_topic_recreated_between_a_micro_batchs_end_and_its_partitions(kafka: KafkaTestCluster) -> None:
    """A micro-batch planned over the old topic and read (or replayed after a restart) once the topic is re-created:
    its planned records went with the old topic. failOnDataLoss=true fails; false skips its ranges, and the next
    micro-batch reads the new topic from its earliest offset: each new record once."""
    topic = kafka.create_topic(1)
    fill(kafka, topic, 10, "old")
    strict = stream_reader(kafka, subscribe=topic, **QUICK_RECHECK)
    lenient = stream_reader(kafka, subscribe=topic, failOnDataLoss="false", **QUICK_RECHECK)
    start = strict.initialOffset()
    end = strict.latestOffset(start, ReadAllAvailable())
    kafka.recreate_topic(topic)
    fill(kafka, topic, 30, "new")
    new_id = _topic_id(kafka, topic)

    with pytest.raises(KafkaEosDataLossError, match=re.escape(f"Topic {topic} was deleted and re-created: its id was "
                                                              f"{end[TOPIC_IDS_KEY][topic]} when this micro-batch was planned")):
        strict.partitions(start, end)
    assert lenient.partitions(start, end) == []
    following = lenient.latestOffset(end, ReadAllAvailable())
    assert offsets_of(following, topic) == {0: 30} and following[TOPIC_IDS_KEY] == {topic: new_id}
    planned = [r for p in lenient.partitions(end, following) for r in ranges_of(p)]
    assert planned == [OffsetRange(topic, 0, 0, 30, new_id)]


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_task_whose_topic_was_recreated_after_planning_reads_nothing_of_it_or_fails(kafka: KafkaTestCluster, engine: str) -> None:
    """The micro-batch's ranges carry the topic's id: a task that finds another one before it reads reads nothing of
    the topic (false) or fails naming both ids (true); never the new topic's records at the old range's offsets."""
    topic = kafka.create_topic(1)
    fill(kafka, topic, 10, "old")
    strict = stream_reader(kafka, subscribe=topic, readEngine=engine, **QUICK_RECHECK)
    lenient = stream_reader(kafka, subscribe=topic, readEngine=engine, failOnDataLoss="false", **QUICK_RECHECK)
    start = strict.initialOffset()
    [planned] = strict.partitions(start, strict.latestOffset(start, ReadAllAvailable()))
    kafka.recreate_topic(topic)
    fill(kafka, topic, 30, "new")

    with pytest.raises(KafkaEosDataLossError, match=rf"Topic {topic} was deleted and re-created"):
        list(strict.read(planned))
    assert list(lenient.read(planned)) == []


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_task_whose_topic_is_recreated_while_it_reads_fails(kafka: KafkaTestCluster, engine: str) -> None:
    """Re-created between the task's first batch and its end: what it read after may be the new topic's (librdkafka
    fetches on by the new id at the old position), so the task fails, whatever failOnDataLoss says."""
    topic = kafka.create_topic(1)
    fill(kafka, topic, 40, "old")
    reader = stream_reader(kafka, subscribe=topic, readEngine=engine, failOnDataLoss="false", maxRecordsPerBatch="10",
                           **QUICK_RECHECK)
    start = reader.initialOffset()
    [planned] = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))
    batches = iter(reader.read(planned))
    first = next(batches)
    assert first.num_rows > 0
    kafka.recreate_topic(topic)
    fill(kafka, topic, 60, "new")
    with pytest.raises(KafkaEosDataLossError, match=rf"Topic {topic} was deleted and re-created while this task read it"):
        list(batches)


def test_a_log_cut_below_the_position_of_the_same_topic_is_read_on_from_its_truncation_point(kafka: KafkaTestCluster) -> None:
    """A position past the log end of a topic whose id is unchanged: the log was truncated (an unclean leader election),
    not re-created. failOnDataLoss=true fails saying so; false reads on from where the log now ends, since the query
    read what lies below it: never the whole retained history again. Without ids (an older checkpoint) the two cannot
    be told apart, and the partition is read again from its earliest offset, as before."""
    topic = kafka.create_topic(1)
    fill(kafka, topic, 10, "kept")
    same = {topic: {"0": 25}, TOPIC_IDS_KEY: {topic: _topic_id(kafka, topic)}}
    strict = stream_reader(kafka, subscribe=topic, **QUICK_RECHECK)
    lenient = stream_reader(kafka, subscribe=topic, failOnDataLoss="false", **QUICK_RECHECK)

    with pytest.raises(KafkaEosDataLossError, match="stands at offset 25, but the partition's log now ends at offset 10.*"
                                                    "its log was truncated"):
        strict.latestOffset(same, ReadAllAvailable())
    end = lenient.latestOffset(same, ReadAllAvailable())
    assert offsets_of(end, topic) == {0: 10}
    assert [r for p in lenient.partitions(same, end) for r in ranges_of(p)] == []
    fill(kafka, topic, 5, "after")
    following = lenient.latestOffset(end, ReadAllAvailable())
    assert [(r.start, r.end) for p in lenient.partitions(end, following) for r in ranges_of(p)] == [(10, 15)]

    older = stream_reader(kafka, subscribe=topic, failOnDataLoss="false", **QUICK_RECHECK)
    without_ids = {topic: {"0": 25}}
    assert offsets_of(older.latestOffset(without_ids, ReadAllAvailable()), topic) == {0: 15}
    planned = older.partitions(without_ids, older.latestOffset(without_ids, ReadAllAvailable()))
    assert [(r.start, r.end) for p in planned for r in ranges_of(p)] == [(0, 15)]
