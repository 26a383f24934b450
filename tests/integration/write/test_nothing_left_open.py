"""No transaction of the sink is left open to pin its last stable offset: not by a query stopped mid-batch,
not by a task that cannot tell whether its epoch was decided, not by a clean-up sweep that failed once.
Each open transaction is judged by Kafka's own ``kafka-transactions`` tool."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException
from pyspark.sql import SparkSession

from spark_kafka_eos._internal.cluster import cached_session
from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord
from spark_kafka_eos._internal.txn.session import TransactionSession, TxnTimeoutError
from spark_kafka_eos._internal.write import task_producer
from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
from spark_kafka_eos._internal.write.hooks import WriterHooks
from spark_kafka_eos._internal.write.task_producer import TaskIdentity, write_task
from spark_kafka_eos._internal.write.transaction_guard import Abandoned, abort_abandoned
from spark_kafka_eos._internal.write.transactional_id import task_transactional_id
from tests.harness.faults import FAIL_AT_OPTION, clear_fired, fired
from tests.harness.kafka import KafkaTestCluster, OpenTransaction, Sent
from tests.harness.kafka_tools import assert_stable
from tests.harness.pipeline import Pipeline, open_transactions
from tests.integration.write.test_operator_calendar import prepared, sink_options, tagged, values

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_a_query_stopped_mid_batch_leaves_nothing_open_and_its_restart_writes_every_record_once(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """``query.stop()`` while a task's transaction is open: Spark kills the task's Python worker, and its
    ``abort()`` fails on the interrupted thread. The open transaction must not stay open for its timeout
    (5 minutes here) pinning the sink's LSO."""
    pipeline = Pipeline.create(spark, kafka, tmp_path, partitions=1)  # one task: none reports, abort() knows nothing
    sent = pipeline.produce(400)
    clear_fired()
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10")  # so that partition 0 has a second batch
    try:
        query = pipeline.start(pipeline.source_df(maxOffsetsPerTrigger=400).selectExpr("key", "value", "partition"),
                               **{FAIL_AT_OPTION: "task_write:sleep120", "kafka.transaction.timeout.ms": 300_000})
        deadline = time.monotonic() + 60
        while not fired("task_write:sleep120"):
            assert time.monotonic() < deadline, "the task never stalled"
            time.sleep(0.2)
        stalled = [t for t in pipeline.open_transactions() if not t.endswith("-coordinator")]
        assert len(stalled) == 1 and query.lastProgress is None  # micro-batch 0 is being written
        query.stop()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    deadline = time.monotonic() + 30
    while pipeline.open_transactions():
        assert time.monotonic() < deadline, f"{pipeline.open_transactions()} still open 30 s after stop()"
        time.sleep(1)
    assert_stable(kafka, pipeline.sink)
    assert values(kafka, pipeline.sink) == []

    restarted = pipeline.start()
    restarted.processAllAvailable()
    restarted.stop()
    pipeline.assert_exactly_once(sent)


def test_a_task_that_cannot_tell_whether_its_epoch_was_decided_aborts_its_own_transaction(
        kafka: KafkaTestCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """After preparing, a task reads the decision log (is it a straggler of a decided epoch?). If that read
    fails, the task fails and Spark retries it; its prepared transaction must not stay open meanwhile."""
    sink, prefix = kafka.create_topic(1, "sink"), f"straggler-{uuid.uuid4().hex[:6]}"
    options = sink_options(kafka, sink, prefix)
    asked: list[EpochId] = []

    def unreadable_log(_options: object, epoch: EpochId) -> bool:
        asked.append(epoch)
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "the decision log's leader is unreachable"))

    monkeypatch.setattr(task_producer, "epoch_already_decided", unreadable_log)
    batch = pa.record_batch([pa.array(tagged("t", 20), pa.binary())], names=["value"])
    with pytest.raises(KafkaException, match="unreachable"):
        write_task(options, EpochId.stream("q", 0), [batch], task=TaskIdentity(0, 0, 0), transaction_timeout_ms=60_000)
    assert asked == [EpochId.stream("q", 0)]  # the fault fired after the transaction was prepared
    assert open_transactions(kafka, prefix) == []
    assert_stable(kafka, sink)


class SessionWhoseListingFails:
    """The real transaction session, whose ListTransactions fails ``failures`` times once armed."""

    def __init__(self, session: TransactionSession) -> None:
        self._session, self.armed, self.failed = session, 0, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._session, name)

    def list_transactions(self, *args: object, **kwargs: object) -> object:
        if self.armed:
            self.armed -= 1
            self.failed += 1
            raise TxnTimeoutError("ListTransactions timed out (injected)")
        return self._session.list_transactions(*args, **kwargs)  # type: ignore[arg-type]


def test_a_sweep_that_fails_is_retried_until_the_stragglers_are_aborted(kafka: KafkaTestCluster) -> None:
    """After phase 2 the coordinator aborts what else of the prefix is open (here a speculative attempt's
    transaction). A sweep that fails twice (a coordinator moving, a broker restarting) is tried again."""
    sink, prefix = kafka.create_topic(2, "sink"), f"sweep-{uuid.uuid4().hex[:6]}"
    options = sink_options(kafka, sink, prefix)
    epoch = EpochId.stream("q", 0)
    tasks = prepared(options, epoch, tagged("e", 40))
    speculative = pa.record_batch([pa.array(tagged("e", 40), pa.binary())], names=["value"])
    straggler = write_task(options, epoch, [speculative], task=TaskIdentity(0, 1, 7), transaction_timeout_ms=60_000)
    assert straggler.transaction is not None
    wrapped: list[SessionWhoseListingFails] = []

    def failing_session(connection: KafkaConnection) -> TransactionSession:
        wrapped.append(SessionWhoseListingFails(cached_session(connection)))
        return wrapped[-1]  # type: ignore[return-value]

    class Arm(WriterHooks):
        def at(self, point: str, session: object, decision: LogRecord) -> None:  # type: ignore[override]
            if point == "after_decision":
                wrapped[-1].armed = 2

    TwoPhaseCommitCoordinator(options, 60_000, Arm(), session_of=failing_session).commit(epoch, tasks)
    assert wrapped[-1].failed == 2
    assert open_transactions(kafka, prefix) == []
    assert values(kafka, sink) == sorted(tagged("e", 40) * 2)


def test_a_transaction_of_the_prefix_opened_right_after_the_decision_is_aborted_by_that_commits_sweep(
        kafka: KafkaTestCluster) -> None:
    """The sweep lists the prefix's open transactions beside phase 2, and must list after the decision: a
    transaction that a straggler opened once the decision was written (and that does not check the log itself, as
    a dying one would not) is seen and aborted before the commit returns."""
    sink, prefix = kafka.create_topic(2, "sink"), f"sweep-{uuid.uuid4().hex[:6]}"
    options = sink_options(kafka, sink, prefix)
    epoch = EpochId.stream("q", 0)
    tasks = prepared(options, epoch, tagged("e", 40))
    late: list[OpenTransaction] = []

    class OpenAfterDecision(WriterHooks):
        def at(self, point: str, session: object, decision: LogRecord) -> None:  # type: ignore[override]
            if point == "after_decision":
                late.append(kafka.open_transaction(sink, [Sent(0, None, b"late")], task_transactional_id(prefix, epoch, 9, 0, 0)))

    TwoPhaseCommitCoordinator(options, 60_000, OpenAfterDecision()).commit(epoch, tasks)
    assert len(late) == 1
    assert open_transactions(kafka, prefix) == []
    assert values(kafka, sink) == sorted(tagged("e", 40) * 2)  # each of the two tasks wrote them all; nothing "late"


def test_the_guard_of_a_worker_that_died_before_it_knew_its_identity_never_aborts_the_attempt_that_took_the_id(
        kafka: KafkaTestCluster) -> None:
    """A worker told its guard that it opened an id, and died before it learnt its producer id and epoch (so
    before it produced anything); another attempt took the id and opened a transaction. The guard aborted
    "any open transaction on the id": the live attempt's."""
    sink = kafka.create_topic(1, "sink")
    txn_id = f"guarded-{uuid.uuid4().hex[:6]}-0-0"
    live = kafka.open_transaction(sink, [Sent(0, None, b"live")], transactional_id=txn_id)
    connection = KafkaConnection(kafka.bootstrap_servers, ())
    assert abort_abandoned([Abandoned(txn_id, connection)]) == []
    live.commit()
    assert values(kafka, sink) == [b"live"]


def test_a_task_tells_its_guard_its_identity_before_it_produces(kafka: KafkaTestCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the guard relies on: the identity reaches it before the task's first record is produced."""
    sink = kafka.create_topic(1, "sink")
    options = sink_options(kafka, sink, f"guard-{uuid.uuid4().hex[:6]}")
    heard: list[str] = []
    guard = task_producer.worker_guard()
    monkeypatch.setattr(guard, "identified", lambda *args: heard.append("identified"))
    produce = task_producer._TaskTransaction.produce
    monkeypatch.setattr(task_producer._TaskTransaction, "produce", lambda self, *args: (heard.append("produce"), produce(self, *args))[1])
    prepared(options, EpochId.stream("q", 0), tagged("g", 5), partitions=1)
    assert heard[:2] == ["identified", "produce"]
