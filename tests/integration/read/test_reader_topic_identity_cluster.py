"""A topic is its id on a real three-broker cluster whose leader epochs are above 0 (issue 64's Done-when): a topic
re-created while the query was down, its new log already past the old position, is told by its id on both read
engines. failOnDataLoss=true fails naming both ids; false reads every record of the new topic once."""

from __future__ import annotations

import re

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.admission_stream_reader import KafkaEosStreamReader
from spark_kafka_eos._internal.read.idle_consumers import IDLE_CONSUMERS
from spark_kafka_eos._internal.read.planner import ranges_of
from spark_kafka_eos._internal.read.topic_identity import TOPIC_IDS_KEY
from spark_kafka_eos.errors import KafkaEosDataLossError
from tests.harness.kafka import Sent
from tests.harness.local_cluster import LocalCluster
from tests.integration.read.test_reader_cluster_consumers import raise_leader_epoch

pytestmark = [pytest.mark.kafka, pytest.mark.long]  # a three-broker cluster restarted: make test-all


def _reader(cluster: LocalCluster, topic: str, engine: str, fail_on_data_loss: str) -> KafkaEosStreamReader:
    return KafkaEosStreamReader(parse_reader_options(
        {"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": topic, "startingoffsets": "earliest",
         "readengine": engine, "failondataloss": fail_on_data_loss, "fetchoffset.retryintervalms": "50"}, streaming=True))


def _read(reader: KafkaEosStreamReader, start: dict[str, object], end: dict[str, object]) -> list[bytes]:
    return sorted(v for p in reader.partitions(start, end) for r in ranges_of(p) for b in reader.read(r)
                  for v in b.column("value").to_pylist())


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_topic_recreated_past_the_position_is_told_by_its_id_above_leader_epoch_0(kafka_cluster: LocalCluster,
                                                                                   engine: str) -> None:
    kafka = kafka_cluster.kafka
    topic = kafka.create_topic(1)
    old = [s.value for s in kafka.produce_plain(topic, [Sent(0, None, f"old-{i:03d}".encode()) for i in range(50)])]
    raise_leader_epoch(kafka_cluster, topic, 1)
    lenient = _reader(kafka_cluster, topic, engine, "false")
    strict = _reader(kafka_cluster, topic, engine, "true")
    start = lenient.initialOffset()
    end = lenient.latestOffset(start, ReadAllAvailable())
    assert _read(lenient, start, end) == sorted(old)
    before = end[TOPIC_IDS_KEY][topic]

    kafka.recreate_topic(topic, 1)
    new = [s.value for s in kafka.produce_plain(topic, [Sent(0, None, f"new-{i:03d}".encode()) for i in range(70)])]
    with pytest.raises(KafkaEosDataLossError, match=re.escape(f"Topic {topic} was deleted and re-created: its id was {before}")):
        strict.latestOffset(end, ReadAllAvailable())
    following = lenient.latestOffset(end, ReadAllAvailable())
    assert following[TOPIC_IDS_KEY][topic] != before
    assert _read(lenient, end, following) == sorted(new)


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_topic_recreated_under_a_fresh_consumer_above_leader_epoch_0_fails_the_task_at_once(kafka_cluster: LocalCluster,
                                                                                             engine: str) -> None:
    """The new topic starts at leader epoch 0, below the one the task's consumer (made by the task, none kept) knows:
    librdkafka takes its metadata for stale and the range makes no progress at all. The task finds the new id at its
    first stall and fails naming it, instead of waiting out kafkaConsumer.pollTimeoutMs."""
    kafka = kafka_cluster.kafka
    topic = kafka.create_topic(1)
    for batch in range(100):  # record batches of their own: a fetch of a few bytes brings one at a time
        kafka.produce_plain(topic, [Sent(0, None, f"old-{batch}-{i}".encode()) for i in range(10)])
    raise_leader_epoch(kafka_cluster, topic, 1)
    # The consumer fetches a few records ahead of the task only, so the re-creation lands mid-range.
    slow = {"kafka.max.partition.fetch.bytes": "1000", "kafka.fetch.max.bytes": "1000", "kafka.message.max.bytes": "1000",
            "kafka.queued.max.messages.kbytes": "1", "kafka.queued.min.messages": "1"}
    reader = KafkaEosStreamReader(parse_reader_options(
        {"kafka.bootstrap.servers": kafka_cluster.bootstrap_servers, "subscribe": topic, "startingoffsets": "earliest",
         "readengine": engine, "failondataloss": "false", "maxrecordsperbatch": "10",
         "kafkaconsumer.polltimeoutms": "60000", **slow}, streaming=True))
    start = reader.initialOffset()
    [planned] = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))
    IDLE_CONSUMERS.close_all()
    batches = iter(reader.read(planned))
    assert next(batches).num_rows > 0
    kafka.recreate_topic(topic, 1)
    kafka.produce_plain(topic, [Sent(0, None, f"new-{i:03d}".encode()) for i in range(5)])
    with pytest.raises(KafkaEosDataLossError, match=rf"Topic {topic} was deleted and re-created while this task read it") as failed:
        list(batches)
    assert "check_at_stall" in {entry.name for entry in failed.traceback}, "the range did not stall mid-range: no fault"


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_task_planned_before_its_topic_was_recreated_above_leader_epoch_0_reads_nothing_of_it_or_fails(
        kafka_cluster: LocalCluster, engine: str) -> None:
    """Planned over the old topic, run after the re-creation (a replay after a restart): the new topic holds more
    records than the range, at leader epoch 0 below the old one's; the task reads none of them (false) or fails naming
    both ids (true)."""
    kafka = kafka_cluster.kafka
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, f"old-{i:03d}".encode()) for i in range(10)])
    raise_leader_epoch(kafka_cluster, topic, 1)
    strict, lenient = _reader(kafka_cluster, topic, engine, "true"), _reader(kafka_cluster, topic, engine, "false")
    start = strict.initialOffset()
    [planned] = strict.partitions(start, strict.latestOffset(start, ReadAllAvailable()))
    kafka.recreate_topic(topic, 1)
    kafka.produce_plain(topic, [Sent(0, None, f"new-{i:03d}".encode()) for i in range(30)])
    with pytest.raises(KafkaEosDataLossError, match=rf"Topic {topic} was deleted and re-created"):
        list(strict.read(planned))
    assert list(lenient.read(planned)) == []
