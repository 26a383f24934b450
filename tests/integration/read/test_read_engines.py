"""The compiled read path and the pure-Python one give the same record batches, and ``readEngine`` picks.

The range rules are shared (``read/partition_reader.py``); what differs is the consumer and the batch
builder, so these tests compare whole batches, schema and boundaries included, on records that use every
column's corner: null and empty keys and values, headers with null values and non-ASCII names, records
without headers, create-time and log-append-time timestamps, aborted transactions in between, and
every compression codec a producer may have used.
"""

from __future__ import annotations

import logging
import threading
import time

import pyarrow as pa
import pytest
from confluent_kafka.admin import OffsetSpec

from spark_kafka_eos._internal.config.reader import READ_ENGINE_VARIABLE, ReaderOptions, parse_reader_options
from spark_kafka_eos._internal.read.fetchers.confluent import ConfluentFetcher
from spark_kafka_eos._internal.read.fetchers.native import NativeFetcher
from spark_kafka_eos._internal.read.idle_consumers import IDLE_CONSUMERS
from spark_kafka_eos._internal.read.partition_reader import open_fetcher, read_offset_range
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos._internal.read.progress import FetchProgress
from spark_kafka_eos._internal.read.record_batch import MAX_TIMESTAMP_MS
from spark_kafka_eos.errors import KafkaEosOptionError, KafkaEosReadError
from tests.harness.kafka import KafkaTestCluster, Sent

CORNERS = [
    Sent(0, None, None),
    Sent(0, b"", b""),
    Sent(0, b"k", b"v" * 3000, headers=(("h", b"x"), ("h", None), ("n\u00e4me", b""))),
    Sent(0, b"\x00\xff", b"\x00", timestamp_ms=1_700_000_000_123),
    Sent(0, None, b"no headers", headers=()),
]


def read_all(options: ReaderOptions, topic: str, end: int) -> list[pa.RecordBatch]:
    return list(read_offset_range(options, OffsetRange(topic, 0, 0, end)))


def both_engines(kafka: KafkaTestCluster, topic: str, **extra: str) -> tuple[list[pa.RecordBatch], list[pa.RecordBatch]]:
    end = kafka.offsets(topic, OffsetSpec.latest())[0]
    raw = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, **extra}
    native = read_all(parse_reader_options({**raw, "readEngine": "native"}, streaming=False), topic, end)
    python = read_all(parse_reader_options({**raw, "readEngine": "python"}, streaming=False), topic, end)
    return native, python


def assert_same_batches(native: list[pa.RecordBatch], python: list[pa.RecordBatch]) -> None:
    assert [b.num_rows for b in native] == [b.num_rows for b in python]
    for got, expected in zip(native, python):
        assert got.schema == expected.schema
        assert got.to_pylist() == expected.to_pylist()
        got.validate(full=True)


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_both_engines_give_the_same_batches(kafka: KafkaTestCluster, timestamp_type: str) -> None:
    topic = kafka.create_topic(1, config={"message.timestamp.type": timestamp_type})
    kafka.produce_plain(topic, CORNERS)
    kafka.write_interleaved(topic, [0], producers=2, transactions=2, records_per_transaction=3, plain_between=1)
    kafka.produce_plain(topic, CORNERS)
    committed = kafka.read_committed(topic)
    native, python = both_engines(kafka, topic, includeHeaders="true", maxRecordsPerBatch="4")
    assert_same_batches(native, python)
    assert [o for b in native for o in b.column("offset").to_pylist()] == [r.offset for r in committed]
    assert [v for b in native for v in b.column("value").to_pylist()] == [r.value for r in committed]
    headers = [h for b in native for h in b.column("headers").to_pylist()]
    assert headers[2] == [{"key": "h", "value": b"x"}, {"key": "h", "value": None}, {"key": "n\u00e4me", "value": b""}]
    assert headers[0] is None and headers[4] is None


def test_without_the_headers_column_too(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, CORNERS * 3)
    native, python = both_engines(kafka, topic, maxBytesPerBatch="3500")
    assert "headers" not in native[0].schema.names
    assert len(native) > 1
    assert_same_batches(native, python)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_every_compression_codec(kafka: KafkaTestCluster, codec: str) -> None:
    topic = kafka.create_topic(1)
    producer = kafka.producer(compression_type=codec, linger_ms=50)
    for i in range(500):
        producer.produce(topic, value=b"%05d" % i + b"-" * 200, key=b"k%d" % (i % 7), partition=0)
    assert producer.flush(30) == 0
    native, python = both_engines(kafka, topic)
    assert_same_batches(native, python)
    assert sum(b.num_rows for b in native) == 500


def test_statistics_report_the_fetch_offset_on_both_paths(kafka: KafkaTestCluster, read_engine: str) -> None:
    """The stall watch needs librdkafka's statistics (the fetch offset moves through aborted records that
    deliver nothing): both fetchers must hand them over while they fetch."""
    topic = kafka.create_topic(1)
    kafka.open_transaction(topic, (Sent(0, None, b"a") for _ in range(2_000))).abort()
    end = kafka.offsets(topic, OffsetSpec.latest())[0]
    raw = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "readEngine": read_engine, "kafkaConsumer.pollTimeoutMs": "1000"}
    progress = FetchProgress(topic, 0)
    fetcher = open_fetcher(parse_reader_options(raw, streaming=False), OffsetRange(topic, 0, 0, end), progress.on_statistics)
    try:
        fetcher.assign(0)
        deadline = time.monotonic() + 30
        while progress.next_offset < end and time.monotonic() < deadline:
            assert fetcher.step(100, 0.05, end).last_offset is None  # nothing but aborted records and a marker
    finally:
        fetcher.close()
    assert progress.next_offset == end


def test_read_engine_picks_the_fetcher(kafka: KafkaTestCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": "t"}
    cases = {"native": NativeFetcher, "python": ConfluentFetcher, "auto": NativeFetcher}
    for engine, fetcher_type in cases.items():
        fetcher = open_fetcher(parse_reader_options({**raw, "readEngine": engine}, streaming=False), OffsetRange("t", 0, 0, 1), print)
        try:
            assert type(fetcher) is fetcher_type, engine
        finally:
            fetcher.close()
    monkeypatch.setenv(READ_ENGINE_VARIABLE, "python")
    assert parse_reader_options(raw, streaming=False).read_engine == "python"
    assert parse_reader_options({**raw, "readEngine": "native"}, streaming=False).read_engine == "native"


def test_auto_reads_with_python_what_the_compiled_path_cannot_run(kafka: KafkaTestCluster) -> None:
    """The compiled librdkafka is built without libcurl, so without OAUTHBEARER OIDC: auto falls back to the
    pure-Python path, native says so before reading."""
    oidc = {
        "kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": "t", "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "OAUTHBEARER", "kafka.sasl.oauthbearer.method": "oidc", "kafka.sasl.oauthbearer.client.id": "c",
        "kafka.sasl.oauthbearer.client.secret": "s3cret", "kafka.sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:9/token",
    }
    fetcher = open_fetcher(parse_reader_options(oidc, streaming=False), OffsetRange("t", 0, 0, 1), print)
    try:
        assert type(fetcher) is ConfluentFetcher
    finally:
        fetcher.close()
    native = parse_reader_options({**oidc, "readEngine": "native"}, streaming=False)
    with pytest.raises(KafkaEosOptionError, match="readEngine.*is native, but the compiled path refused the configuration.*sasl.oauthbearer.method") as refused:
        open_fetcher(native, OffsetRange("t", 0, 0, 1), print)
    assert "s3cret" not in str(refused.value)


def test_the_compiled_consumer_s_position_stays_at_the_partition_eof(kafka: KafkaTestCluster) -> None:
    """librdkafka before 2.13.2 (issue #4844; rdkafka-sys bundles 2.12.1) moved the position to offset + 1 of
    every event, the partition-EOF event included: after the EOF at 5 it said 6, and a range ending one past
    a broker's end read one record short. The compiled path builds 2.15.1 (native/fetch-librdkafka.sh)."""
    native = pytest.importorskip("spark_kafka_eos_native")
    assert tuple(int(p) for p in native.LIBRDKAFKA_VERSION.split(".")[:3]) >= (2, 13, 2), native.LIBRDKAFKA_VERSION
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, f"v{i}".encode()) for i in range(5)])
    options = parse_reader_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "readEngine": "native"},
                                   streaming=False)
    fetcher = open_fetcher(options, OffsetRange(topic, 0, 0, 10), FetchProgress(topic, 0).on_statistics)
    assert isinstance(fetcher, NativeFetcher)
    try:
        fetcher.assign(0)
        deadline, error = time.monotonic() + 30, None
        while error is None and time.monotonic() < deadline:
            error = fetcher.step(100, 0.5, 10).error
        assert error is not None and error.offset == 5, error
        assert fetcher.position() == 5
    finally:
        fetcher.close()


@pytest.mark.parametrize("read_engine", ["native", "python"])
def test_a_timestamp_spark_cannot_hold_fails_the_read_naming_the_record(kafka: KafkaTestCluster, read_engine: str) -> None:
    """Spark's timestamp column holds microseconds in a 64-bit integer: a record timestamp past about 292,000 years
    (a topic whose message.timestamp.after.max.ms lets it in) fails the read, as Spark's own source does. The compiled
    path had panicked there, leaking the message, after which closing the consumer could block for ever."""
    topic = kafka.create_topic(1, config={"message.timestamp.after.max.ms": str(2**63 - 1)})
    kafka.produce_plain(topic, [Sent(0, None, b"before"), Sent(0, None, b"far", timestamp_ms=MAX_TIMESTAMP_MS + 1),
                                Sent(0, None, b"after")])
    assert [r.timestamp_ms for r in kafka.read_committed(topic)][1] == MAX_TIMESTAMP_MS + 1
    options = parse_reader_options(
        {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "readEngine": read_engine}, streaming=False
    )
    IDLE_CONSUMERS.close_all()
    started = time.monotonic()
    with pytest.raises(KafkaEosReadError, match=f"offset 1 of {topic}-0 has the timestamp {MAX_TIMESTAMP_MS + 1} ms"):
        read_all(options, topic, 3)
    assert time.monotonic() - started < 30  # the consumer closed: nothing leaked holds it open
    assert len(IDLE_CONSUMERS) == 0  # a failed read's consumer is closed, not kept for the next range


@pytest.mark.parametrize("read_engine", ["native", "python"])
def test_a_process_reads_its_next_ranges_on_the_consumer_its_last_range_left(
    kafka: KafkaTestCluster, monkeypatch: pytest.MonkeyPatch, read_engine: str
) -> None:
    """A task's next range, and the next task of a reused worker, read on one consumer: each range exact, however
    the last one ended (at the log's end, with an EOF event queued and a fetch in flight; inside the log)."""
    topic = kafka.create_topic(2)
    kafka.produce_plain(topic, [Sent(p, None, f"{p}-{i}".encode()) for i in range(5) for p in (0, 1)])
    kafka.write_interleaved(topic, [0], producers=1, transactions=2, records_per_transaction=2)
    options = parse_reader_options(
        {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "readEngine": read_engine}, streaming=False
    )
    kept: list[object] = []
    keep = IDLE_CONSUMERS.keep
    monkeypatch.setattr(IDLE_CONSUMERS, "keep", lambda key, consumer, close: (kept.append(consumer), keep(key, consumer, close)))
    IDLE_CONSUMERS.close_all()

    def read(partition: int, start: int, end: int) -> list[tuple[int, bytes]]:
        batches = list(read_offset_range(options, OffsetRange(topic, partition, start, end)))
        return [(o, v) for b in batches for o, v in zip(b.column("offset").to_pylist(), b.column("value").to_pylist())]

    committed = {p: [(r.offset, r.value) for r in kafka.read_committed(topic) if r.partition == p] for p in (0, 1)}
    end_0 = kafka.offsets(topic, OffsetSpec.latest())[0]
    assert read(0, 0, end_0) == committed[0]
    assert read(1, 0, 5) == committed[1]
    assert read(1, 2, 4) == committed[1][2:4]
    kafka.produce_plain(topic, [Sent(0, None, f"0-{i}".encode()) for i in range(5, 8)])
    assert read(0, end_0, end_0 + 3) == [(end_0 + i, f"0-{5 + i}".encode()) for i in range(3)]
    clients = [getattr(kept_one, "consumer", kept_one) for kept_one in kept]  # python: a KeptConsumer
    assert len(clients) == 4 and all(client is clients[0] for client in clients), kept
    assert len(IDLE_CONSUMERS) == 1


@pytest.mark.parametrize("read_engine", ["native", "python"])
def test_a_kept_consumer_looks_up_a_topic_it_has_not_read_before_assigning_it(
    kafka: KafkaTestCluster, caplog: pytest.LogCaptureFixture, read_engine: str
) -> None:
    """A partition assigned in a topic the client has no metadata for waits for librdkafka's once-a-second topic scan
    before its first fetch: a kept consumer's first range of another topic of the query took 0.92 s (compiled) and
    0.5-0.6 s (pure Python) to its first record. The client looks the topic up itself (librdkafka's "fast leader query",
    started from the application's thread), once per topic."""
    first, second = kafka.create_topic(1), kafka.create_topic(1)
    for topic in (first, second):
        kafka.produce_plain(topic, [Sent(0, None, f"{topic}-{i}".encode()) for i in range(3)])
    IDLE_CONSUMERS.close_all()
    options = parse_reader_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": f"{first},{second}",
                                    "readEngine": read_engine, "kafka.debug": "topic,metadata"}, streaming=False)

    def read(topic: str) -> list[bytes]:
        return [v for b in read_all(options, topic, 3) for v in b.column("value").to_pylist()]

    def lookups() -> int:
        return sum("[thrd:app]: Starting fast leader query" in r.getMessage() for r in caplog.records)

    with caplog.at_level(logging.DEBUG, logger="spark_kafka_eos.librdkafka"):
        assert read(first) == [f"{first}-{i}".encode() for i in range(3)]
        assert len(IDLE_CONSUMERS) == 1 and lookups() == 1
        caplog.clear()
        assert read(second) == [f"{second}-{i}".encode() for i in range(3)]
        assert len(IDLE_CONSUMERS) == 1 and lookups() == 1, "the kept consumer did not look the new topic up"
        caplog.clear()
        assert read(first) == [f"{first}-{i}".encode() for i in range(3)]
        assert lookups() == 0, "a topic the client knows is looked up once"
    IDLE_CONSUMERS.close_all()


def test_the_compiled_consumer_refuses_a_configuration_without_a_group_id(kafka: KafkaTestCluster) -> None:
    """Without a group.id librdkafka has no consumer queue; the compiled consumer used to crash the process (SIGSEGV)
    when closed."""
    native = pytest.importorskip("spark_kafka_eos_native")
    with pytest.raises(ValueError, match="needs a group.id"):
        native.RangeConsumer([("bootstrap.servers", kafka.bootstrap_servers)], "t", 0, False, 10, 1 << 20, (0, 1, -1))


@pytest.mark.parametrize("read_engine", ["native", "python"])
def test_a_consumer_kept_by_a_read_on_one_thread_serves_a_read_on_another(kafka: KafkaTestCluster, read_engine: str) -> None:
    """The driver reads on several threads: a kept consumer may be taken on another thread than the one that made it
    (the compiled one had been bound to its thread and panicked there)."""
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, f"v{i}".encode()) for i in range(4)])
    options = parse_reader_options(
        {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "readEngine": read_engine}, streaming=False
    )
    IDLE_CONSUMERS.close_all()
    assert [v for b in read_all(options, topic, 1) for v in b.column("value").to_pylist()] == [b"v0"]
    read_on_thread: list[list[pa.RecordBatch]] = []
    worker = threading.Thread(target=lambda: read_on_thread.append(list(read_offset_range(options, OffsetRange(topic, 0, 1, 3)))))
    worker.start()
    worker.join(60)
    assert [v for b in read_on_thread[0] for v in b.column("value").to_pylist()] == [b"v1", b"v2"]
    assert len(IDLE_CONSUMERS) == 1
    batches = list(read_offset_range(options, OffsetRange(topic, 0, 3, 4)))
    assert [v for b in batches for v in b.column("value").to_pylist()] == [b"v3"]
    assert len(IDLE_CONSUMERS) == 1
    IDLE_CONSUMERS.close_all()
