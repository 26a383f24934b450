"""A long run of aborted records is progress, not a stall.

librdkafka skips aborted records without delivering anything and without moving ``position()``
until the transaction's abort marker; its statistics report the fetcher's ``next_offset`` moving
on meanwhile. The reader's stall rule
(``read/progress.py``, unit-tested in ``tests/unit/test_read_progress.py``) rests on that: this
test pins it on a real broker, so that a librdkafka that reports otherwise fails here.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.partition_reader import read_offset_range
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos._internal.read.progress import FetchProgress
from tests.harness.kafka import KafkaTestCluster, Sent

pytestmark = [pytest.mark.kafka]

ABORTED_RECORDS = 20_000


def test_the_statistics_report_the_fetch_offset_past_aborted_records(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.open_transaction(topic, (Sent(0, None, b"a" * 1000) for _ in range(ABORTED_RECORDS))).abort()
    end = kafka.offsets(topic, OffsetSpec.latest())[0]
    assert end == ABORTED_RECORDS + 1  # the aborted run and its marker; nothing committed after them
    progress = FetchProgress(topic, 0)
    consumer = Consumer({
        "bootstrap.servers": kafka.bootstrap_servers, "group.id": "unused", "isolation.level": "read_committed",
        "enable.auto.commit": False, "enable.partition.eof": True, "statistics.interval.ms": 100,
        "stats_cb": progress.on_statistics,
    })
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while progress.next_offset < end and time.monotonic() < deadline:
            delivered = [m for m in consumer.consume(100, 0.1) if not m.error()]
            assert delivered == []
    finally:
        consumer.close()
    assert progress.next_offset == end


def test_a_range_of_aborted_records_reads_as_empty(kafka: KafkaTestCluster, read_engine: str) -> None:
    topic = kafka.create_topic(1)
    kafka.open_transaction(topic, (Sent(0, None, b"a") for _ in range(5_000))).abort()
    kafka.produce_plain(topic, [Sent(0, None, b"committed")])
    options = parse_reader_options(
        {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "readEngine": read_engine}, streaming=False
    )
    batches = list(read_offset_range(options, OffsetRange(topic, 0, 0, 5_002)))
    assert [v for b in batches for v in b.column("value").to_pylist()] == [b"committed"]
