"""The executor side of the write path against a real broker: write_task leaves exactly one open
transaction with the producer id / epoch it reports, which the driver's TransactionSession then commits
or aborts; an independent read_committed consumer says what became visible. No Spark needed: the task
identity is given explicitly. Every test runs on both write paths (the compiled producer and
confluent-kafka's)."""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException

from spark_kafka_eos._internal.cluster import cached_session
from spark_kafka_eos._internal.config.writer import WRITE_ENGINE_VARIABLE, WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log.records import EpochId
from spark_kafka_eos._internal.retry import Backoff, Deadline, wait_until
from spark_kafka_eos._internal.txn.session import TransactionSession, TxnState
from spark_kafka_eos._internal.write import task_producer
from spark_kafka_eos._internal.write.commit_message import TaskCommit
from spark_kafka_eos._internal.write.task_producer import TaskIdentity, epoch_already_decided, write_task
from spark_kafka_eos._internal.write.transactional_id import task_transactional_id
from spark_kafka_eos.errors import KafkaEosWriteError
from tests.harness.kafka import KafkaTestCluster

pytestmark = pytest.mark.kafka

EPOCH = EpochId.batch("task-tests")
HEADERS_ARROW = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
ARROW_TYPES = {
    "value": pa.binary(), "key": pa.binary(), "topic": pa.string(), "partition": pa.int32(), "headers": HEADERS_ARROW,
    "source_topic": pa.string(), "source_partition": pa.int32(), "source_offset": pa.int64(),
}


@pytest.fixture(autouse=True, params=["native", "python"])
def write_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both write paths, as the driver's default ``writeEngine`` (``make test`` builds the compiled one, so
    a missing one fails the test)."""
    engine: str = request.param
    monkeypatch.setenv(WRITE_ENGINE_VARIABLE, engine)
    return engine


@pytest.fixture(scope="module", autouse=True)
def warm_coordinator_session(kafka: KafkaTestCluster) -> None:
    """Tasks keep one coordinator session per Python worker (its IO thread stays): open it before
    tests count native threads."""
    cached_session(sink(kafka, None).connection)


@pytest.fixture(scope="module")
def session(kafka: KafkaTestCluster) -> Iterator[TransactionSession]:
    with TransactionSession(kafka.bootstrap_servers, request_timeout_s=10) as txn_session:
        yield txn_session


def sink(kafka: KafkaTestCluster, topic: str | None, **extra: str) -> WriterOptions:
    options = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "transactional.id.prefix": f"task-{uuid.uuid4().hex[:10]}"}
    if topic is not None:
        options["topic"] = topic
    options.update({key.replace("__", "."): value for key, value in extra.items()})
    return parse_writer_options({key.lower(): value for key, value in options.items()}, streaming=False)


def batch(**columns: list[Any]) -> pa.RecordBatch:
    """A record batch typed as Spark's Arrow writer hands it over; str values make a string column."""
    fields = {name: pa.string() if name in ("value", "key") and any(isinstance(v, str) for v in values) else ARROW_TYPES[name]
              for name, values in columns.items()}
    return pa.RecordBatch.from_pydict(columns, schema=pa.schema(list(fields.items())))


def values_batch(prefix: str, count: int) -> pa.RecordBatch:
    return batch(value=[f"{prefix}-{i}".encode() for i in range(count)])


def describe(session: TransactionSession, transactional_id: str) -> Any:
    return session.describe([transactional_id])[transactional_id]


def commit(session: TransactionSession, kafka: KafkaTestCluster, commit: TaskCommit, *topics: str) -> None:
    assert commit.transaction is not None
    session.commit(commit.transaction)
    assert describe_settled(session, commit.transaction.transactional_id).state == TxnState.COMPLETE_COMMIT
    for topic in topics:
        kafka.wait_until_stable(topic)


def describe_settled(session: TransactionSession, transactional_id: str) -> Any:
    return session.wait_settled([transactional_id], timeout_s=30)[transactional_id]


def visible_values(kafka: KafkaTestCluster, topic: str) -> list[bytes]:
    return sorted(record.value or b"" for record in kafka.read_committed(topic))


def assert_aborted(session: TransactionSession, transactional_id: str) -> None:
    # After an abortable error (e.g. a refused record) librdkafka aborts by bumping the epoch
    # (InitProducerId, KIP-360): the coordinator aborts the transaction and then shows the id Empty.
    assert describe_settled(session, transactional_id).state in (TxnState.COMPLETE_ABORT, TxnState.EMPTY)


def assert_nothing_open(session: TransactionSession, prefix: str) -> None:
    ongoing = session.list_transactions(state_filters=[TxnState.ONGOING])
    assert [t.transactional_id for t in ongoing if t.transactional_id.startswith(prefix + "-")] == []


def native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def test_rows_leave_one_open_transaction_that_commits_to_exactly_those_rows(
    kafka: KafkaTestCluster, session: TransactionSession
) -> None:
    topic = kafka.create_topic(partitions=3)
    options = sink(kafka, topic)
    batches = [values_batch("a", 40), batch(value=[]), values_batch("b", 25)]
    # A first task of this process makes the clients the process keeps (spark_kafka_eos._internal.cluster): count
    # threads after it, so that only this task's own producer is measured, whatever ran before.
    warm_topic = kafka.create_topic(partitions=1)
    warm_up = write_task(sink(kafka, warm_topic), EPOCH, iter([values_batch("warm", 1)]), TaskIdentity(0, 0, 1))
    commit(session, kafka, warm_up, warm_topic)
    epoch_already_decided(options, EPOCH)  # and the reader of this prefix's decision-log index, if the log exists
    threads_before = native_threads()

    result = write_task(options, EPOCH, iter(batches), TaskIdentity(spark_partition=4, attempt_number=1, task_attempt_id=77))

    assert (result.spark_partition, result.attempt_number, result.task_attempt_id) == (4, 1, 77)
    assert result.transaction is not None
    assert result.transaction.transactional_id == task_transactional_id(options.prefix, EPOCH, 4, 1)
    # The producer is gone (its librdkafka threads with it), yet its transaction stays open.
    deadline = time.monotonic() + 10
    while native_threads() > threads_before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert native_threads() <= threads_before
    ongoing = describe(session, result.transaction.transactional_id)
    assert ongoing.state == TxnState.ONGOING
    assert ongoing.prepared_state() == result.transaction
    assert ongoing.topic_partitions == {topic: tuple(p for t, p, _ in result.records)}
    assert all(t == topic for t, _, _ in result.records) and result.record_count == 65
    assert visible_values(kafka, topic) == []

    commit(session, kafka, result, topic)
    records = kafka.read_committed(topic)
    assert sorted(r.value or b"" for r in records) == sorted([f"a-{i}".encode() for i in range(40)] + [f"b-{i}".encode() for i in range(25)])
    per_partition = {p: sum(1 for r in records if r.partition == p) for _, p, _ in result.records}
    assert tuple((topic, p, n) for p, n in sorted(per_partition.items())) == result.records
    assert_nothing_open(session, options.prefix)


def test_abort_leaves_nothing_visible_and_nothing_open(kafka: KafkaTestCluster, session: TransactionSession) -> None:
    topic = kafka.create_topic(partitions=2)
    options = sink(kafka, topic)
    result = write_task(options, EPOCH, iter([values_batch("x", 30)]), TaskIdentity(0, 0, 1))
    assert result.transaction is not None

    session.abort(result.transaction)

    assert describe_settled(session, result.transaction.transactional_id).state == TxnState.COMPLETE_ABORT
    kafka.wait_until_stable(topic)
    assert visible_values(kafka, topic) == []
    assert_nothing_open(session, options.prefix)


def test_the_producer_warms_up_while_the_task_waits_for_its_rows(
    kafka: KafkaTestCluster, session: TransactionSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = kafka.create_topic(partitions=1)
    options = sink(kafka, topic)
    events: list[str] = []

    class Recorded(task_producer._EarlyProducer):
        def _run(self, *args: Any) -> None:
            super()._run(*args)
            events.append("warmed up")

    monkeypatch.setattr(task_producer, "_EarlyProducer", Recorded)

    def rows() -> Iterator[pa.RecordBatch]:
        # Spark's reader is still reading: the warm-up must not wait for it.
        assert wait_until(lambda: bool(events), Deadline(30), Backoff(0.01))
        events.append("rows")
        yield values_batch("early", 5)

    result = write_task(options, EPOCH, rows(), TaskIdentity(0, 0, 11))
    commit(session, kafka, result, topic)
    assert events == ["warmed up", "rows"]
    assert visible_values(kafka, topic) == sorted(f"early-{i}".encode() for i in range(5))


def committed_on_one_id(kafka: KafkaTestCluster, session: TransactionSession, task_attempt_id: int) -> tuple[str, WriterOptions, str]:
    """(topic, options, the task id): a task's 3 rows ("first-N") committed on a new 1-partition topic, so that a
    later task of that partition and attempt finds its id used by an earlier epoch."""
    topic = kafka.create_topic(partitions=1)
    options = sink(kafka, topic)
    first = write_task(options, EPOCH, iter([values_batch("first", 3)]), TaskIdentity(0, 0, task_attempt_id))
    commit(session, kafka, first, topic)
    assert first.transaction is not None
    return topic, options, first.transaction.transactional_id


def test_an_id_an_earlier_epoch_used_is_initialised_while_the_task_waits_for_its_rows(
    kafka: KafkaTestCluster, session: TransactionSession
) -> None:
    topic, options, txn_id = committed_on_one_id(kafka, session, 12)
    epoch_before = describe(session, txn_id).producer_epoch
    initialised_before_rows: list[bool] = []

    def rows() -> Iterator[pa.RecordBatch]:
        initialised_before_rows.append(wait_until(lambda: describe(session, txn_id).producer_epoch > epoch_before,
                                                  Deadline(30), Backoff(0.02)))
        yield values_batch("second", 4)

    second = write_task(options, EPOCH, rows(), TaskIdentity(0, 0, 13))

    assert initialised_before_rows == [True]
    assert second.transaction is not None and second.transaction.transactional_id == txn_id
    assert second.transaction.producer_epoch > epoch_before
    commit(session, kafka, second, topic)
    assert visible_values(kafka, topic) == sorted([f"first-{i}".encode() for i in range(3)] + [f"second-{i}".encode() for i in range(4)])


def test_an_id_an_earlier_epoch_used_is_described_once_before_its_early_start(
    kafka: KafkaTestCluster, session: TransactionSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm-up thread asks the id's state, then starts the producer at once: asking again in between would
    only repeat the request (one more for the broker each task of each micro-batch)."""
    topic, options, txn_id = committed_on_one_id(kafka, session, 16)
    epoch_before = describe(session, txn_id).producer_epoch
    asked: list[str] = []
    describe_now = TransactionSession.describe

    def counted(self: TransactionSession, transactional_ids: list[str]) -> Any:
        asked.extend(transactional_ids)
        return describe_now(self, transactional_ids)

    monkeypatch.setattr(TransactionSession, "describe", counted)
    second = write_task(options, EPOCH, iter([values_batch("second", 2)]), TaskIdentity(0, 0, 17))
    monkeypatch.undo()

    assert second.transaction is not None and second.transaction.transactional_id == txn_id
    assert second.transaction.producer_epoch > epoch_before
    assert asked.count(txn_id) == 1
    commit(session, kafka, second, topic)
    assert visible_values(kafka, topic) == sorted([f"first-{i}".encode() for i in range(3)] + [f"second-{i}".encode() for i in range(2)])


def test_no_rows_on_an_id_an_earlier_epoch_used_opens_no_transaction(kafka: KafkaTestCluster, session: TransactionSession) -> None:
    topic, options, _ = committed_on_one_id(kafka, session, 14)
    threads_before = native_threads()

    result = write_task(options, EPOCH, iter([]), TaskIdentity(0, 0, 15))

    assert result.transaction is None
    assert wait_until(lambda: native_threads() <= threads_before, Deadline(10), Backoff(0.05))
    assert describe(session, task_transactional_id(options.prefix, EPOCH, 0, 0)).state != TxnState.ONGOING
    assert_nothing_open(session, options.prefix)
    assert visible_values(kafka, topic) == sorted(f"first-{i}".encode() for i in range(3))


@pytest.mark.parametrize("batches", [[], [batch(value=[]), batch(value=[])]], ids=["no-batches", "empty-batches"])
def test_no_rows_opens_no_transaction(kafka: KafkaTestCluster, session: TransactionSession, batches: list[pa.RecordBatch]) -> None:
    topic = kafka.create_topic(partitions=1)
    options = sink(kafka, topic)
    threads_before = native_threads()

    result = write_task(options, EPOCH, iter(batches), TaskIdentity(2, 0, 9))

    # No rows: the digest of nothing, which adds nothing to the epoch's.
    assert result == TaskCommit(str(EPOCH), 2, 0, 9, transaction=None, records=(), source_offsets=(), rows_digest="0" * 32)
    # The producer warmed up while the task waited for rows (metadata only) is released once its warm-up ends.
    assert wait_until(lambda: native_threads() <= threads_before, Deadline(10), Backoff(0.05))
    assert describe(session, task_transactional_id(options.prefix, EPOCH, 2, 0)).state == TxnState.NOT_FOUND


def test_record_larger_than_the_topic_accepts_fails_clearly_and_aborts(
    kafka: KafkaTestCluster, session: TransactionSession
) -> None:
    topic = kafka.create_topic(partitions=1, config={"max.message.bytes": "2000"})
    options = sink(kafka, topic, kafka__batch__size="1000")
    rows = [values_batch("small", 10), batch(value=[b"x" * 5000]), values_batch("after", 10)]

    with pytest.raises(KafkaEosWriteError) as raised:
        write_task(options, EPOCH, iter(rows), TaskIdentity(0, 0, 3))

    message = str(raised.value)
    assert f"topic {topic} partition 0" in message and "MSG_SIZE_TOO_LARGE" in message
    assert "max.message.bytes" in message and "aborted" in message
    assert raised.value.code == KafkaError.MSG_SIZE_TOO_LARGE
    assert_aborted(session, task_transactional_id(options.prefix, EPOCH, 0, 0))
    kafka.wait_until_stable(topic)
    assert visible_values(kafka, topic) == []
    assert_nothing_open(session, options.prefix)


def test_an_attempt_never_re_initialises_an_id_holding_a_prepared_transaction(kafka: KafkaTestCluster, session: TransactionSession) -> None:
    """A stage retry restarts Spark's attempt numbers: the new attempt must not abort what an attempt of the
    failed stage attempt prepared (it may be the one Spark lets commit)."""
    topic = kafka.create_topic(partitions=2)
    options = sink(kafka, topic)
    first = write_task(options, EPOCH, iter([values_batch("first", 20)]), TaskIdentity(1, 0, 10))
    assert first.transaction is not None and describe(session, first.transaction.transactional_id).state == TxnState.ONGOING

    second = write_task(options, EPOCH, iter([values_batch("second", 15)]), TaskIdentity(1, 0, 11))

    assert second.transaction is not None
    assert second.transaction.transactional_id == task_transactional_id(options.prefix, EPOCH, 1, 0, slot=1)
    session.commit(first.transaction)
    commit(session, kafka, second, topic)
    assert visible_values(kafka, topic) == sorted([f"first-{i}".encode() for i in range(20)] + [f"second-{i}".encode() for i in range(15)])
    assert_nothing_open(session, options.prefix)


def test_a_zombie_attempt_that_has_not_prepared_is_fenced(kafka: KafkaTestCluster, session: TransactionSession) -> None:
    topic = kafka.create_topic(partitions=1)
    options = sink(kafka, topic)
    zombie = kafka.producer(task_transactional_id(options.prefix, EPOCH, 0, 0))  # initialised, no transaction open yet

    task = write_task(options, EPOCH, iter([values_batch("live", 5)]), TaskIdentity(0, 0, 12))

    assert task.transaction is not None and task.transaction.transactional_id == task_transactional_id(options.prefix, EPOCH, 0, 0)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(30)
    assert fenced.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    commit(session, kafka, task, topic)
    assert visible_values(kafka, topic) == sorted(f"live-{i}".encode() for i in range(5))


def test_topic_partition_headers_and_null_keys_per_row(kafka: KafkaTestCluster, session: TransactionSession) -> None:
    left, right = kafka.create_topic(partitions=3), kafka.create_topic(partitions=2)
    options = sink(kafka, topic=None)
    rows = batch(
        value=["v0", "v1", "v2", "v3", None],
        key=["k0", None, "k2", None, "k4"],
        topic=[left, right, left, right, left],
        partition=[2, 1, None, 0, 1],
        headers=[[{"key": "h", "value": b"1"}, {"key": "nil", "value": None}], None, [], None, [{"key": "h", "value": b"2"}]],
    )

    result = write_task(options, EPOCH, iter([rows]), TaskIdentity(0, 0, 5))
    commit(session, kafka, result, left, right)

    seen = {(r.topic, r.value): r for topic in (left, right) for r in kafka.read_committed(topic)}
    assert set(seen) == {(left, b"v0"), (right, b"v1"), (left, b"v2"), (right, b"v3"), (left, None)}
    assert (seen[left, b"v0"].partition, seen[left, b"v0"].key, seen[left, b"v0"].headers) == (2, b"k0", (("h", b"1"), ("nil", None)))
    assert (seen[right, b"v1"].partition, seen[right, b"v1"].key, seen[right, b"v1"].headers) == (1, None, None)
    assert (seen[left, b"v2"].key, seen[left, b"v2"].headers) == (b"k2", None)  # partition chosen by the partitioner
    assert (seen[right, b"v3"].partition, seen[right, b"v3"].key) == (0, None)
    assert (seen[left, None].partition, seen[left, None].key, seen[left, None].headers) == (1, b"k4", (("h", b"2"),))
    counts = {(t, p): n for t, p, n in result.records}
    assert sum(counts.values()) == 5 and counts[(right, 1)] == 1 and counts[(right, 0)] == 1


def test_topic_option_wins_over_the_topic_column(kafka: KafkaTestCluster, session: TransactionSession) -> None:
    chosen, ignored = kafka.create_topic(partitions=1), kafka.create_topic(partitions=1)
    result = write_task(sink(kafka, chosen), EPOCH, iter([batch(value=[b"v"], topic=[ignored])]), TaskIdentity(0, 0, 1))
    commit(session, kafka, result, chosen)
    assert result.records == ((chosen, 0, 1),)
    assert visible_values(kafka, chosen) == [b"v"] and visible_values(kafka, ignored) == []


@pytest.mark.parametrize("missing", [None, ""], ids=["null", "empty"])
def test_a_row_without_a_topic_and_no_topic_option_fails_and_aborts(
        kafka: KafkaTestCluster, session: TransactionSession, missing: str | None) -> None:
    topic = kafka.create_topic(partitions=1)
    options = sink(kafka, topic=None)
    rows = [batch(value=[b"ok"], topic=[topic]), batch(value=[b"lost", b"also lost"], topic=[topic, missing])]

    with pytest.raises(KafkaEosWriteError, match="no topic"):
        write_task(options, EPOCH, iter(rows), TaskIdentity(0, 0, 1))

    assert_aborted(session, task_transactional_id(options.prefix, EPOCH, 0, 0))
    kafka.wait_until_stable(topic)
    assert visible_values(kafka, topic) == []


def test_a_transaction_the_producer_failed_to_abort_is_aborted_by_identity(
        kafka: KafkaTestCluster, session: TransactionSession, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The fault: the producer's abort returns without aborting (as librdkafka did once under load). The task
    checks the coordinator and aborts its transaction by producer id and epoch, so nothing stays open."""
    from spark_kafka_eos._internal.write.producers.confluent import ConfluentProducer
    from spark_kafka_eos._internal.write.producers.native import NativeProducer

    for client in (ConfluentProducer, NativeProducer):
        monkeypatch.setattr(client, "abort", lambda self, timeout_s: None)
    topic = kafka.create_topic(partitions=1)
    options = sink(kafka, topic)

    def failing() -> Iterator[pa.RecordBatch]:
        yield values_batch("x", 20)
        raise RuntimeError("upstream failure")

    with caplog.at_level(logging.WARNING, logger=task_producer.__name__), pytest.raises(RuntimeError, match="upstream failure"):
        write_task(options, EPOCH, failing(), TaskIdentity(0, 0, 1))

    assert any("still open after the producer aborted it" in r.message for r in caplog.records)  # the fault fired
    assert_aborted(session, task_transactional_id(options.prefix, EPOCH, 0, 0))
    kafka.wait_until_stable(topic)
    assert visible_values(kafka, topic) == []
    assert_nothing_open(session, options.prefix)


def test_failure_upstream_of_the_writer_aborts_what_was_written(kafka: KafkaTestCluster, session: TransactionSession) -> None:
    topic = kafka.create_topic(partitions=1)
    options = sink(kafka, topic)

    def failing() -> Iterator[pa.RecordBatch]:
        yield values_batch("before-the-failure", 5)
        raise RuntimeError("the query failed upstream")

    with pytest.raises(RuntimeError, match="upstream"):
        write_task(options, EPOCH, failing(), TaskIdentity(0, 0, 1))

    assert_aborted(session, task_transactional_id(options.prefix, EPOCH, 0, 0))
    kafka.wait_until_stable(topic)
    assert visible_values(kafka, topic) == []


def test_source_offsets_are_max_plus_one_per_source_partition(kafka: KafkaTestCluster, session: TransactionSession) -> None:
    topic = kafka.create_topic(partitions=1)
    options = sink(kafka, topic, consumerGroup="task-producer-group")
    first = batch(value=[b"a", b"b", b"c", b"d"], source_topic=["in", "in", "other", "in"],
                  source_partition=[0, 1, 0, 0], source_offset=[10, 7, 3, 12])
    second = batch(value=[b"e", b"f", b"g"], source_topic=["in", "in", None],
                   source_partition=[0, 1, 5], source_offset=[11, 9, 100])

    result = write_task(options, EPOCH, iter([first, second]), TaskIdentity(0, 0, 1))

    assert result.source_offsets == (("in", 0, 13), ("in", 1, 10), ("other", 0, 4))
    assert result.records == ((topic, 0, 7),)
    assert result.transaction is not None
    session.abort(result.transaction)
    describe_settled(session, result.transaction.transactional_id)
