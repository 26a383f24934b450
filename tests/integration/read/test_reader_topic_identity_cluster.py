"""A topic is its id on a real three-broker cluster whose leader epochs are above 0 (issue 64's Done-when): a topic
re-created while the query was down, its new log already past the old position, is told by its id on both read
engines. failOnDataLoss=true fails naming both ids; false reads every record of the new topic once."""

from __future__ import annotations

import re

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.admission_stream_reader import KafkaEosStreamReader
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
