"""No silent skips at a range's edges, on both read engines, on a real broker: a planned end past the log's
end (a topic re-created shorter under a checkpoint; with librdkafka 2.12's position after an EOF event,
an end exactly one past the log "succeeded" one record short on the compiled path), and a batch whose bytes
were corrupted on the broker's disk (librdkafka skips a batch it cannot decode; Spark's consumer throws)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pyarrow as pa
import pytest

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read import partition_reader
from spark_kafka_eos._internal.read.partition_reader import read_offset_range
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos.errors import KafkaEosDataLossError, KafkaEosReadError
from tests.conftest import BOOTSTRAP_ENV
from tests.harness.kafka import KafkaTestCluster, Sent

pytestmark = [pytest.mark.kafka]

ENGINES = ["native", "python"]


def read(kafka: KafkaTestCluster, topic: str, end: int, engine: str, **extra: str) -> list[pa.RecordBatch]:
    options = parse_reader_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "readEngine": engine,
                                    "kafkaConsumer.pollTimeoutMs": "60000", **extra}, streaming=False)
    return list(read_offset_range(options, OffsetRange(topic, 0, 0, end)))


def values(batches: list[pa.RecordBatch]) -> list[bytes]:
    return [v for b in batches for v in b.column("value").to_pylist()]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_range_planned_one_past_the_log_end_is_a_data_loss_not_a_silent_short_read(
        kafka: KafkaTestCluster, engine: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(partition_reader, "CONFIRM_S", 2.0)
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, f"v{i}".encode()) for i in range(5)])
    with pytest.raises(KafkaEosDataLossError, match=rf"Offsets 5 to 5 of {topic}-0 \[0, 6\) do not exist"):
        read(kafka, topic, 6, engine)
    with caplog.at_level(logging.WARNING, logger=partition_reader.__name__):
        assert values(read(kafka, topic, 6, engine, failOnDataLoss="false")) == [f"v{i}".encode() for i in range(5)]
    assert "Skipping what is left of the range (failOnDataLoss=false)" in caplog.text


def segment_of(kafka: KafkaTestCluster, topic: str, request: pytest.FixtureRequest) -> Path:
    """The first log segment of ``topic``'s partition 0 on this session's broker (started by the test session)."""
    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip("the broker's log files are needed: run with the session's own broker")
    base = request.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    found = sorted(base.glob(f"kafka*/log/{topic}-0/*.log"))
    assert found, f"no segment of {topic}-0 under {base}"
    return found[0]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_batch_corrupted_on_the_broker_fails_the_read_naming_its_offset(
        kafka: KafkaTestCluster, engine: str, request: pytest.FixtureRequest) -> None:
    topic = kafka.create_topic(1)
    for value in (b"intact-0", b"CORRUPT-ME-1", b"intact-2"):  # a batch each
        kafka.produce_plain(topic, [Sent(0, None, value)])
    segment = segment_of(kafka, topic, request)
    data = segment.read_bytes()
    at = data.index(b"CORRUPT-ME-1")
    with open(segment, "r+b") as log_file:  # the broker serves the page cache: the next fetch sees the flipped byte
        log_file.seek(at)
        log_file.write(b"X")
    with pytest.raises(KafkaEosReadError, match=rf"Reading {topic}-0 \[0, 3\) failed at offset 1: librdkafka cannot decode"):
        read(kafka, topic, 3, engine)
