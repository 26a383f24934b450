"""librdkafka's logs go through Python logging at matching levels, never straight to stderr."""

from __future__ import annotations

import logging

import pytest

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.partition_reader import read_offset_range
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos.errors import KafkaEosReadError
from tests.harness.local_kafka import free_loopback_port


def test_a_refused_connection_is_logged_as_an_error_not_printed(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str], read_engine: str
) -> None:
    nobody = f"127.0.0.1:{free_loopback_port()}"  # nothing listens there
    options = parse_reader_options(
        {"kafka.bootstrap.servers": nobody, "subscribe": "t", "kafkaConsumer.pollTimeoutMs": "1500",
         "readEngine": read_engine}, streaming=False
    )
    with caplog.at_level(logging.INFO, logger="spark_kafka_eos.librdkafka"):
        with pytest.raises(KafkaEosReadError, match="made no progress"):
            list(read_offset_range(options, OffsetRange("t", 0, 0, 10)))
    refused = [r for r in caplog.records if r.name == "spark_kafka_eos.librdkafka" and "Connection refused" in r.getMessage()]
    assert refused and {r.levelno for r in refused} == {logging.ERROR}
    assert "Connection refused" not in capfd.readouterr().err
