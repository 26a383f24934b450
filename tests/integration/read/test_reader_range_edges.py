"""The range reader at the edges of its ranges, on both read engines, on the session's broker (issue 49 items 4 to
6): an error event just past a range's end leaves the complete range complete; a task of many ranges of a deleted
topic settles their doubt together, not :data:`CONFIRM_S` after another; headers librdkafka cannot parse fail the
read, as Spark's source does, instead of becoming null."""

from __future__ import annotations

import logging
import struct
import time
from pathlib import Path

import pyarrow as pa
import pytest
from kafka.record.util import calc_crc32c

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read import partition_reader
from spark_kafka_eos._internal.read.partition_reader import read_offset_range, read_offset_ranges
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos.errors import KafkaEosReadError
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.integration.read.test_reader_silent_skips import segment_of

pytestmark = [pytest.mark.kafka]

ENGINES = ["native", "python"]


def options_of(kafka: KafkaTestCluster, topic: str, engine: str, **extra: str) -> object:
    return parse_reader_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "readEngine": engine,
                                 "kafkaConsumer.pollTimeoutMs": "60000", **extra}, streaming=False)


def values(batches: list[pa.RecordBatch]) -> list[bytes]:
    return [v for b in batches for v in b.column("value").to_pylist()]


def flip_byte_after(segment: Path, marker: bytes, fix_crc: bool, at: int = 0, to: bytes = b"X") -> None:
    """Overwrite the byte ``at`` bytes from where ``marker`` starts in ``segment`` with ``to``; with ``fix_crc``, write
    the batch's CRC-32C again, so that the batch is intact to a CRC check (the broker serves the page cache: the next
    fetch sees it)."""
    data = bytearray(segment.read_bytes())
    where = data.index(marker) + at
    data[where:where + 1] = to
    if fix_crc:
        pos = 0
        while True:  # v2 batches: baseOffset (8), batchLength (4), partitionLeaderEpoch (4), magic (1), crc (4), ...
            length = struct.unpack_from(">i", data, pos + 8)[0]
            if pos <= where < pos + 12 + length:
                break
            pos += 12 + length
        struct.pack_into(">I", data, pos + 17, calc_crc32c(bytes(data[pos + 21:pos + 12 + length])))
    with open(segment, "r+b") as log_file:
        log_file.write(bytes(data))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_corrupt_batch_right_past_a_range_leaves_the_range_complete(
        kafka: KafkaTestCluster, engine: str, request: pytest.FixtureRequest) -> None:
    """A committed transaction of offsets 0-4, its marker at 5, then a corrupt batch at 6: the range [0, 6) holds 5
    records, all delivered before the corrupt batch's error event, in the same fetch."""
    topic = kafka.create_topic(1)
    kafka.open_transaction(topic, [Sent(0, None, f"r{i}".encode()) for i in range(5)]).commit()
    for value in (b"CORRUPT-ME-6", b"intact-7"):
        kafka.produce_plain(topic, [Sent(0, None, value)])
    flip_byte_after(segment_of(kafka, topic, request), b"CORRUPT-ME-6", fix_crc=False)
    # The fault fired: a range holding offset 6 fails, naming it.
    with pytest.raises(KafkaEosReadError, match=rf"Reading {topic}-0 \[0, 8\) failed at offset 6: librdkafka cannot decode"):
        list(read_offset_range(options_of(kafka, topic, engine), OffsetRange(topic, 0, 0, 8)))
    assert values(list(read_offset_range(options_of(kafka, topic, engine), OffsetRange(topic, 0, 0, 6)))) == [
        f"r{i}".encode() for i in range(5)]
    assert sorted(r.value for r in kafka.read_committed(topic, timeout_s=10) if r.value.startswith(b"r")) == [
        f"r{i}".encode() for i in range(5)]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_packed_task_over_a_deleted_topic_settles_its_doubts_together(
        kafka: KafkaTestCluster, engine: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    confirm_s = 3.0
    monkeypatch.setattr(partition_reader, "CONFIRM_S", confirm_s)
    partitions = 6
    topic = kafka.create_topic(partitions)
    kafka.produce_plain(topic, [Sent(p, None, f"v{p}-{i}".encode()) for p in range(partitions) for i in range(2)])
    ranges = [OffsetRange(topic, p, 0, 2) for p in range(partitions)]  # planned while the topic was there
    kafka.delete_topic(topic)
    assert topic not in kafka.admin.list_topics(timeout=10).topics
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="spark_kafka_eos"):
        got = values(list(read_offset_ranges(options_of(kafka, topic, engine, failOnDataLoss="false"), ranges)))
    took = time.monotonic() - began
    assert got == []
    # Each range's loss is told, none silently skipped...
    assert caplog.text.count("the topic or partition is gone") == partitions, caplog.text
    # ...after the first range's doubt, not one doubt after another (6 x 3 s).
    assert took < 2 * confirm_s + 3, f"the {partitions} ranges of the deleted topic took {took:.1f}s"


@pytest.mark.parametrize("engine", [
    "native",
    pytest.param("python", marks=pytest.mark.xfail(strict=True, reason=(
        "confluent-kafka drops librdkafka's header parse error when it makes a Message (headers() is None, as for a "
        "record without headers): the pure-Python path cannot tell them apart"))),
])
def test_headers_librdkafka_cannot_parse_fail_the_read(kafka: KafkaTestCluster, engine: str, request: pytest.FixtureRequest) -> None:
    """A record whose first header's name length points past the record (its batch's CRC written again, so only
    the header parse fails): Spark's source fails on it; a null headers column would lose them silently."""
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, b"intact-0", (("h", b"v"),))])
    kafka.produce_plain(topic, [Sent(0, None, b"bad-headers-1", (("hk-bad", b"hv"),))])
    kafka.produce_plain(topic, [Sent(0, None, b"intact-2", (("h", b"v"),))])
    # The name's length (a zigzag varint, 0x0c: 6) becomes 63, past the record's end.
    flip_byte_after(segment_of(kafka, topic, request), b"hk-bad", fix_crc=True, at=-1, to=b"\x7e")
    headers_read = options_of(kafka, topic, engine, includeHeaders="true")
    # The fault fired only where asked: without headers the record reads whole, as do its neighbours with them.
    assert values(list(read_offset_range(options_of(kafka, topic, engine), OffsetRange(topic, 0, 0, 3)))) == [
        b"intact-0", b"bad-headers-1", b"intact-2"]
    intact = [b for b in read_offset_range(headers_read, OffsetRange(topic, 0, 2, 3))]
    assert [h for b in intact for h in b.column("headers").to_pylist()] == [[{"key": "h", "value": b"v"}]]
    with pytest.raises(KafkaEosReadError, match=rf"offset 1 of {topic}-0 .*headers"):
        list(read_offset_range(headers_read, OffsetRange(topic, 0, 0, 3)))
