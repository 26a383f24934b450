"""The compiled write path and the pure-Python one write the same records, and ``writeEngine`` picks.

The transaction rules are shared (``write/task_producer.py``); what differs is how rows reach librdkafka
and how delivery reports are tallied. So these tests write the same batches on both paths, each into
fresh topics, and compare what an independent read_committed consumer sees, record by record (partition,
offset, key, value, headers), together with what the task reports to the driver (counts per partition,
and a probe that points at one of its records, with its digest). The batches use every column's corner: null and empty keys and values, string
and binary columns with 32- and 64-bit offsets, headers (as lists and as large lists) with null values and non-ASCII names, explicit and
null partitions, a topic column, and a batch that is a slice of a larger one (Arrow offsets not zero).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from spark_kafka_eos._internal.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log.records import EpochId
from spark_kafka_eos._internal.native import extension as native_extension
from spark_kafka_eos._internal.txn.session import TransactionSession
from spark_kafka_eos._internal.write.commit_message import TaskCommit
from spark_kafka_eos._internal.write.producers.native import open_native_producer
from spark_kafka_eos._internal.write.task_producer import TaskIdentity, write_task
from spark_kafka_eos._internal.write.visibility import record_digest
from spark_kafka_eos.errors import KafkaEosOptionError
from tests.harness.kafka import KafkaTestCluster

pytestmark = pytest.mark.kafka

EPOCH = EpochId.batch("write-engine-tests")
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
LARGE_HEADERS = pa.large_list(HEADERS.value_type)


@pytest.fixture(scope="module")
def session(kafka: KafkaTestCluster) -> Any:
    with TransactionSession(kafka.bootstrap_servers, request_timeout_s=10) as txn_session:
        yield txn_session


def sink(kafka: KafkaTestCluster, engine: str, **extra: str) -> WriterOptions:
    options = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "transactional.id.prefix": f"engine-{uuid.uuid4().hex[:10]}",
               "writeEngine": engine, **{key.replace("__", "."): value for key, value in extra.items()}}
    return parse_writer_options({key.lower(): value for key, value in options.items()}, streaming=False)


def corners(topics: tuple[str, str], value_type: pa.DataType, headers_type: pa.DataType = HEADERS) -> pa.RecordBatch:
    """Rows with a key or an explicit partition each, so that every record's partition is the same on both paths."""
    left, right = topics
    values: list[Any] = [b"v0", b"", None, b"\x00\xff" * 700, b"v4", b"v5", "n\u00e4me".encode(), b"v7"]
    return pa.RecordBatch.from_pydict(
        {
            "value": pa.array([v if v is None or not pa.types.is_string(value_type) and not pa.types.is_large_string(value_type)
                               else v.decode("utf-8", "replace") for v in values], value_type),
            "key": pa.array([b"k0", None, b"k2", b"", b"k4", None, b"k0", b"\xff"], pa.binary()),
            "topic": [left, right, left, right, left, right, left, right],
            "partition": pa.array([None, 1, 2, None, 0, 0, None, 1], pa.int32()),
            "headers": pa.array(
                [[{"key": "h", "value": b"1"}, {"key": "nil", "value": None}], None, [], [{"key": "n\u00e4me", "value": b""}],
                 None, [{"key": "h", "value": b"2"}], None, [{"key": "", "value": b"x"}]], headers_type),
        }
    )


def write_and_commit(kafka: KafkaTestCluster, session: TransactionSession, engine: str, batches: list[pa.RecordBatch],
                     topics: tuple[str, str]) -> tuple[TaskCommit, list[tuple[Any, ...]]]:
    result = write_task(sink(kafka, engine), EPOCH, iter(batches), TaskIdentity(0, 0, 1))
    assert result.transaction is not None
    session.commit(result.transaction)
    records = []
    for index, topic in enumerate(topics):
        kafka.wait_until_stable(topic)
        records += [(index, r.partition, r.offset, r.key, r.value, r.headers) for r in kafka.read_committed(topic)]
    return result, sorted(records, key=lambda r: (r[0], r[1], r[2]))


@pytest.mark.parametrize(("value_type", "headers_type"), [(pa.binary(), HEADERS), (pa.string(), HEADERS), (pa.large_binary(), LARGE_HEADERS)],
                         ids=["binary", "string", "large_binary"])
def test_both_engines_write_the_same_records(kafka: KafkaTestCluster, session: TransactionSession, value_type: pa.DataType,
                                             headers_type: pa.DataType) -> None:
    written: dict[str, tuple[TaskCommit, list[tuple[Any, ...]], tuple[str, str]]] = {}
    for engine in ("native", "python"):
        topics = (kafka.create_topic(partitions=3), kafka.create_topic(partitions=2))
        whole = corners(topics, value_type, headers_type)
        batches = [whole, pa.RecordBatch.from_pydict({name: [] for name in whole.schema.names}, schema=whole.schema),
                   whole.slice(2, 5)]
        result, records = write_and_commit(kafka, session, engine, batches, topics)
        written[engine] = (result, records, topics)

    (native, native_records, native_topics), (python, python_records, python_topics) = written["native"], written["python"]
    assert len(native_records) == 13
    assert native_records == python_records
    assert [r[4] for r in native_records if r[4] is None] == [None, None]  # the tombstone, in the batch and in its slice
    rename = dict(zip(native_topics, python_topics))
    # Sorted: the counts come sorted by topic name, and "t-100-..." sorts before "t-99-...".
    assert sorted((rename[t], p, n) for t, p, n in native.records) == sorted(python.records)
    # The probe is the first record delivered (which partition's comes first varies): on each path it must
    # point at a record it wrote, with that record's digest.
    for result, records, topics in written.values():
        assert result.probe is not None
        topic, partition, offset = result.probe
        [(key, value)] = [(r[3], r[4]) for r in records if (topics[r[0]], r[1], r[2]) == (topic, partition, offset)]
        assert result.probe_digest == record_digest(key, value)


def test_a_full_producer_queue_is_waited_out_on_the_compiled_path(kafka: KafkaTestCluster, session: TransactionSession) -> None:
    topic = kafka.create_topic(partitions=2)
    rows = 20_000
    # 200 records fit the queue: producing 20,000 in one call cannot go on without waiting for deliveries.
    options = sink(kafka, "native", topic=topic, kafka__queue__buffering__max__messages="200")
    result = write_task(options, EPOCH, iter([pa.RecordBatch.from_pydict({"value": [b"%d" % i for i in range(rows)]})]), TaskIdentity(0, 0, 1))
    assert result.transaction is not None
    session.commit(result.transaction)
    kafka.wait_until_stable(topic)
    assert sorted(int(r.value or b"") for r in kafka.read_committed(topic)) == list(range(rows))
    assert sum(n for _, _, n in result.records) == rows


def test_without_the_wheel_auto_takes_the_pure_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_extension, "native", None)
    assert open_native_producer({"bootstrap.servers": "127.0.0.1:9"}, required=False) is None
    with pytest.raises(KafkaEosOptionError, match="writeEngine.*is native, but spark-kafka-eos-native is not installed where this task runs"):
        open_native_producer({"bootstrap.servers": "127.0.0.1:9"}, required=True)


def test_a_configuration_with_a_python_callback_takes_the_pure_python_path_unless_native_is_required() -> None:
    config = {"bootstrap.servers": "127.0.0.1:9", "transactional.id": "callback", "sasl.mechanism": "OAUTHBEARER",
              "security.protocol": "SASL_PLAINTEXT", "oauth_cb": lambda _config: ("token", 0.0)}
    assert open_native_producer(config, required=False) is None
    with pytest.raises(KafkaEosOptionError, match="writeEngine.*is native, but these kafka.\\* settings need a Python callback"):
        open_native_producer(config, required=True)
    assert open_native_producer({"bootstrap.servers": "127.0.0.1:9", "transactional.id": "plain"}, required=False) is not None


def native_task_producer() -> Any:
    """The extension's own producer, not started: what it does with its input is checked before any record is produced."""
    native = native_extension.native_module()
    assert native is not None, "make test builds the compiled wheel"
    return native.TaskProducer([("bootstrap.servers", "127.0.0.1:9"), ("transactional.id", f"input-{uuid.uuid4().hex[:6]}")])


def produce_columns(values: pa.Array, keys: pa.Array | None = None, partitions: pa.Array | None = None,
                    headers: pa.Array | None = None) -> Any:
    producer = native_task_producer()
    try:
        return producer.produce("t", None, values.__arrow_c_array__(), None if keys is None else keys.__arrow_c_array__(),
                                None if partitions is None else partitions.__arrow_c_array__(),
                                None if headers is None else headers.__arrow_c_array__(), 1000)
    finally:
        producer.close()


def test_the_compiled_producer_refuses_columns_of_other_lengths_before_producing_any() -> None:
    """Review finding: given more rows than the arrays hold, produce read past them."""
    with pytest.raises(ValueError, match="column key has 2 rows, the batch 3"):
        produce_columns(pa.array([b"a", b"b", b"c"]), keys=pa.array([b"k", b"l"]))
    with pytest.raises(ValueError, match="column partition has 4 rows, the batch 3"):
        produce_columns(pa.array([b"a", b"b", b"c"]), partitions=pa.array([0, 1, 2, 3], pa.int32()))


def test_the_compiled_producer_refuses_offsets_that_go_backwards() -> None:
    """Review finding: offsets that go backwards wrapped into a huge slice (undefined behaviour)."""
    offsets = pa.py_buffer(np.array([0, 5, 2, 6], dtype=np.int32).tobytes())
    broken = pa.Array.from_buffers(pa.binary(), 3, [None, offsets, pa.py_buffer(b"abcdef")])
    with pytest.raises(ValueError, match=r"column value: its Arrow data is malformed \(.*non-monotonic offset"):
        produce_columns(broken)


@pytest.mark.parametrize("headers", [
    pa.array([[{"key": "h", "value": b"1"}]], pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]), 1)),
    pa.array([[{"key": "h", "value": b"1"}]], pa.list_view(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    pa.array([["h"]], pa.list_(pa.string())),
], ids=["fixed_size_list", "list_view", "list_of_strings"])
def test_the_compiled_producer_refuses_a_headers_column_of_another_type(headers: pa.Array) -> None:
    """Review finding: a fixed_size_list or list_view headers column was read as 32-bit list offsets."""
    with pytest.raises(TypeError, match="column headers: Arrow type '.*' is not supported here; expected list<struct<key: string, value: binary>>"):
        produce_columns(pa.array([b"a"]), headers=headers)


def test_the_compiled_producer_refuses_dictionary_and_other_value_types() -> None:
    with pytest.raises(TypeError, match="column value: a dictionary-encoded array is not supported"):
        produce_columns(pa.array([b"a", b"b"]).dictionary_encode())
    with pytest.raises(TypeError, match="column value: Arrow type 'i' is not supported here; expected binary or string"):
        produce_columns(pa.array([1, 2], pa.int32()))
    with pytest.raises(TypeError, match="column partition: Arrow type 'l' is not supported here; expected int32"):
        produce_columns(pa.array([b"a"]), partitions=pa.array([1], pa.int64()))


def test_the_compiled_producer_produces_a_batch_without_the_gil() -> None:
    """Review finding: the produce loop held the GIL for the whole batch. Another Python thread must run while a
    batch is produced (records queued for a broker that is not there: librdkafka keeps them in its queue)."""
    native = native_extension.native_module()
    assert native is not None, "make test builds the compiled wheel"
    producer = native.TaskProducer([("bootstrap.servers", "127.0.0.1:9"), ("queue.buffering.max.messages", "10000000"),
                                    ("queue.buffering.max.kbytes", "2097151")])
    ticks: list[float] = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        rows = 200_000
        while True:
            values, partitions = pa.array([b"v"] * rows), pa.array([0] * rows, pa.int32())
            began = time.monotonic()
            refused = producer.produce("t", None, values.__arrow_c_array__(), None, partitions.__arrow_c_array__(), None, 1000)
            ended = time.monotonic()
            assert refused is None
            # A batch long enough that the GIL's switch interval (5 ms) at its edges cannot explain a tick inside it.
            if ended - began > 0.1 or rows >= 3_200_000:
                break
            rows *= 2
    finally:
        stop.set()
        thread.join()
        producer.close()
    assert ended - began > 0.1, f"{rows} records were produced in {ended - began:.3f}s, too fast to tell"
    assert [t for t in ticks if began + 0.03 < t < ended - 0.03], "no other Python thread ran while the batch was produced"
