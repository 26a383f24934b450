"""Executor side of the write path: one task attempt's transaction, prepared for the driver to decide.

Per task attempt: one transactional producer under its id (see :mod:`spark_kafka_eos._internal.write.transactional_id`), created on the
first non-empty Arrow batch (a task without rows opens no transaction and registers no id). It runs
init_transactions (fencing any earlier holder of the id), begin, produce, flush -- the prepare phase -- then
reads its producer id and epoch and is dropped *without* ``close()``: ``close()`` would abort the
transaction, while dropping the last reference leaves it open on the coordinator for the driver to commit
or abort by identity (see :mod:`spark_kafka_eos._internal.txn.session`).

The producer id and epoch come from librdkafka's statistics (``eos.producer_id`` / ``eos.producer_epoch``):
they are the producer's own and need no extra connection from the executor. The first statistics after
init_transactions have them, usually before the flush ends; only a task faster than one statistics interval
waits for them. A transactional producer's epoch does not move while its transaction is open (librdkafka bumps it
only when the transaction is aborted), and the coordinator checks both against DescribeTransactions before
deciding.

Any failure (a record the broker refuses, a null topic, an error upstream in the iterator) aborts the task's
transaction before the error propagates, so nothing the task wrote can ever become visible.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext

from spark_kafka_eos._internal.client_errors import ClientCallError, ClientError, KafkaErrorCode
from spark_kafka_eos._internal.cluster import cached_session, cluster_metadata, known_topic
from spark_kafka_eos._internal.config.writer import STATS_INTERVAL_MS, WriterOptions
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.records import EpochId, Position
from spark_kafka_eos._internal.native.engine import Engine
from spark_kafka_eos._internal.retry import OPERATION_TIMEOUT_S
from spark_kafka_eos._internal.txn.session import PreparedTxnState, TxnState
from spark_kafka_eos._internal.write.commit_message import PartitionCount, SourceOffset, TaskCommit
from spark_kafka_eos._internal.write.delivery_reports import write_error
from spark_kafka_eos._internal.write.input_schema import (
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TOPIC,
    InputColumns,
)
from spark_kafka_eos._internal.write.ownership import already_decided
from spark_kafka_eos._internal.write.producers import open_producer
from spark_kafka_eos._internal.write.producers.producer_client import ProducerClient
from spark_kafka_eos._internal.write.row_digest import add, as_text, batch_digest
from spark_kafka_eos._internal.write.transaction_guard import worker_guard
from spark_kafka_eos._internal.write.transactional_id import task_transactional_id_candidates
from spark_kafka_eos.errors import KafkaEosWriteError

log = logging.getLogger(__name__)

DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
"""librdkafka's default; the driver normally passes the broker's transaction.max.timeout.ms instead."""
_FLUSH_SLICE_S = 0.2
_ABORT_FLUSH_S = 10.0
_ABORT_IDENTITY_WAIT_S = 2.0
_IDENTITY_TIMEOUT_S = max(10.0, 20 * STATS_INTERVAL_MS / 1000)


@dataclass(frozen=True)
class TaskIdentity:
    """Which Spark task attempt is writing."""

    spark_partition: int
    attempt_number: int
    task_attempt_id: int

    @classmethod
    def current(cls) -> TaskIdentity:
        """The identity of the running Spark task (``pyspark.TaskContext``)."""
        context = TaskContext.get()
        if context is None:
            raise RuntimeError("write_task is not running in a Spark task: pass task=TaskIdentity(...) explicitly")
        return cls(context.partitionId(), context.attemptNumber(), context.taskAttemptId())


def write_task(
    options: WriterOptions,
    epoch: EpochId,
    batches: Iterable[pa.RecordBatch],
    task: TaskIdentity | None = None,
    transaction_timeout_ms: int | None = None,
    columns: InputColumns | None = None,
) -> TaskCommit:
    """Write ``batches`` in one open transaction of this task attempt of ``epoch`` and return its
    commit message.

    ``task`` defaults to the running Spark task; ``transaction_timeout_ms`` (as resolved by the driver) to
    ``options.transaction_timeout_ms``, then to :data:`DEFAULT_TRANSACTION_TIMEOUT_MS`; ``columns`` (as found by
    the driver's :func:`validate_input_schema`) to those of the first batch. The transaction is left open
    (flushed, not committed) for the driver's coordinator.
    """
    identity = task or TaskIdentity.current()
    timeout_ms = transaction_timeout_ms or options.transaction_timeout_ms or DEFAULT_TRANSACTION_TIMEOUT_MS
    transaction: _TaskTransaction | None = None
    positions = _SourcePositions()
    rows = digest = 0
    guard = worker_guard()
    candidates = task_transactional_id_candidates(options.prefix, epoch, identity.spark_partition, identity.attempt_number)
    early = _EarlyProducer(options, candidates[0], timeout_ms)
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            rows += batch.num_rows
            if columns is None:
                columns = InputColumns.of(batch.schema.names)
            if transaction is None:
                transaction = _open_transaction(options, candidates, timeout_ms, early)
                guard.opened(options.connection, transaction.transactional_id)
                # Before anything is produced (no transaction is open on the coordinator yet): the guard then
                # never aborts by guess, which could hit another attempt that took the id after this one died.
                guard.identified(transaction.transactional_id, *transaction.wait_for_identity())
            transaction.produce(batch, columns, options.topic)
            digest = add(digest, batch_digest(batch, columns, options.topic))
            if columns.source_position:
                positions.add(batch)
        prepared, records, probe, probe_digest = transaction.prepare(timeout_ms) if transaction is not None else (None, (), None, None)
        if prepared is not None and _decided_or_abort(options, epoch, prepared):
            # A straggler (a speculative or zombie attempt, or a replay of a decided epoch): nobody will
            # decide this transaction, and the sweep that followed the decision may not have seen it.
            cached_session(options.connection).abort(prepared)
            log.warning("%s of prefix %s is already decided: aborted this attempt's transaction %s",
                        epoch.describe(), options.prefix, prepared.transactional_id)
            prepared, records, probe, probe_digest = None, (), None, None
    except BaseException as exc:
        early.discard()
        if transaction is not None:
            _ensure_aborted(options, transaction.transactional_id, transaction.abort())
            guard.released(transaction.transactional_id)
            # The traceback's frames still reference the producer; release it now, not when the error is dropped.
            traceback.clear_frames(exc.__traceback__)
        raise
    early.discard()
    if transaction is not None:
        guard.released(transaction.transactional_id)  # handed to the driver with the commit message
    return TaskCommit(
        epoch_id=str(epoch),
        spark_partition=identity.spark_partition,
        attempt_number=identity.attempt_number,
        task_attempt_id=identity.task_attempt_id,
        transaction=prepared,
        records=records,
        source_offsets=positions.next_offsets(),
        source_starts=positions.first_offsets(),
        probe=probe,
        probe_digest=probe_digest,
        input_rows=rows,
        rows_digest=as_text(digest),
    )


def count_task_input(epoch: EpochId, batches: Iterable[pa.RecordBatch], columns: InputColumns, topic: str | None,
                     task: TaskIdentity | None = None) -> TaskCommit:
    """A task of a batch job whose ``writeId`` is already committed: it writes nothing, but counts its input (rows,
    their digest as ``topic`` would take them, and the source offsets the rows carry), which the driver compares
    with what the job was decided over. ``task`` defaults to the running Spark task."""
    identity = task or TaskIdentity.current()
    positions = _SourcePositions()
    rows = digest = 0
    for batch in batches:
        rows += batch.num_rows
        if batch.num_rows:
            digest = add(digest, batch_digest(batch, columns, topic))
        if columns.source_position and batch.num_rows:
            positions.add(batch)
    return TaskCommit(str(epoch), identity.spark_partition, identity.attempt_number, identity.task_attempt_id, None,
                      source_offsets=positions.next_offsets(), source_starts=positions.first_offsets(), input_rows=rows,
                      rows_digest=as_text(digest))


def epoch_already_decided(options: WriterOptions, epoch: EpochId) -> bool:
    """True if the prefix decided ``epoch`` or a later micro-batch of its run; False when it has no decision
    log yet. Raises when the log cannot be read: then nobody can tell.

    Only the prefix's index entry is read, never a scan of the whole log (which, in every task of a prefix's first
    job, cost more than the rest of the task and grew with the log): each decision commits the entry with it, so a
    decision is missed only where Kafka let the entry expire (the prefix idle for offsets.retention.minutes). This
    check only spares work: a task that misses its epoch's decision prepares as if it were new, and the driver's
    commit, which reads the whole log, recognises the replay and aborts the task's transaction as a duplicate."""
    if not known_topic(options.connection, options.decision_log_topic):  # seen by this worker before: no request
        metadata = cluster_metadata(options.connection, options.decision_log_topic, timeout_s=10)
        found = metadata.topics.get(options.decision_log_topic)
        if found is None or found.error is not None:
            return False
    return already_decided(KafkaDecisionLog(options).last(options.prefix, scan_unindexed=False), epoch)


def _decided_or_abort(options: WriterOptions, epoch: EpochId, prepared: PreparedTxnState) -> bool:
    """:func:`epoch_already_decided`; if that cannot be told, the task aborts its own transaction and fails
    (Spark retries it): left open, a straggler's transaction would pin the sink's LSO until it timed out."""
    try:
        return epoch_already_decided(options, epoch)
    except Exception:
        try:
            cached_session(options.connection).abort(prepared)
        except Exception as err:  # noqa: BLE001 - the error below matters more; the driver's sweep retries
            log.warning("Could not abort %s either (%s)", prepared.transactional_id, err)
        raise


def _ensure_aborted(options: WriterOptions, transactional_id: str, identity: tuple[int, int] | None) -> None:
    """Check that the coordinator no longer holds this attempt's transaction open (``identity``: its producer
    id and epoch, when librdkafka reported them) and abort it by identity if it does: a failed task must not
    leave a transaction pinning the sink's LSO until its timeout. Best effort: the driver's sweep is the backstop."""
    if identity is None:
        return
    try:
        session = cached_session(options.connection)
        described = session.describe([transactional_id])[transactional_id]
        if described.state == TxnState.ONGOING and (described.producer_id, described.producer_epoch) == identity:
            log.warning("The transaction of %s was still open after the producer aborted it: aborting it by identity", transactional_id)
            session.abort(PreparedTxnState(transactional_id, *identity))
    except Exception as err:  # noqa: BLE001 - the task's own error matters more
        log.warning("Could not check that %s is aborted (%s); the driver's recovery aborts it", transactional_id, err)


_WARM_UP = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kafka-eos-producer-warm-up")
"""Warms up tasks' producers; kept for the worker's life: a thread started per task cost its task a GIL hand-off
(up to ``sys.getswitchinterval()``, 5 ms) while the new thread started. Two, so that a task whose warm-up is still
running when it ends (it had no rows) does not hold up the next task's."""


class _EarlyProducer:
    """The producer of a task's first candidate id, made and warmed up on a thread while the task waits for its
    first rows (Spark starts the writer's worker with the reader's: the rows come after the read). The warm-up sends
    metadata requests only, then asks the id's state (DescribeTransactions). InitProducerId runs on the thread too
    when the id already exists (an earlier epoch of the run used it): that registers nothing new, while on an
    unknown id it waits for the first rows, so that a task without rows never registers an id. An id that holds an
    open transaction is left to the task, which takes the next candidate. An error here is raised when the first
    rows come, where it would have been raised without the thread; an early InitProducerId that fails is left to
    the task."""

    def __init__(self, options: WriterOptions, candidate: str, timeout_ms: int) -> None:
        self.candidate = candidate
        self._lock = threading.Lock()
        self._ready: tuple[ProducerClient, bool] | None = None
        self._taken = False
        self._error: Exception | None = None
        self._discarded = False
        self._done = _WARM_UP.submit(self._run, options, timeout_ms)

    def _run(self, options: WriterOptions, timeout_ms: int) -> None:
        topic = options.topic or options.decision_log_topic
        try:
            client = open_producer(options.producer_config(self.candidate, timeout_ms), options.write_engine)
            client.warm_up(topic, OPERATION_TIMEOUT_S)
            state = cached_session(options.connection).describe([self.candidate])[self.candidate].state
        except Exception as err:  # noqa: BLE001 - raised by take(), in the task's thread
            self._error = err
            return
        if state == TxnState.ONGOING:
            self._taken = True
            client.release()
            return
        started = state != TxnState.NOT_FOUND and self._start_early(client, topic)
        with self._lock:
            if not self._discarded:
                self._ready = (client, started)
                return
        client.release()

    def _start_early(self, client: ProducerClient, topic: str) -> bool:
        """InitProducerId on an id that exists, right after :meth:`_run` saw it free (asking again first would only
        repeat that request); False (the task starts it, and meets any error) if it failed."""
        try:
            client.start(topic, OPERATION_TIMEOUT_S, None)
        except Exception as err:  # noqa: BLE001 - the task's own start raises what matters
            log.debug("early init_transactions of %s failed (%s); the task starts it itself", self.candidate, err)
            return False
        return True

    def take(self) -> tuple[ProducerClient | None, bool, bool]:
        """A warmed-up client for :attr:`candidate` (None if it holds an open transaction), whether that client is
        already started (InitProducerId done), and whether the candidate holds an open transaction; raises what
        the thread met."""
        self._done.result()
        if self._error is not None:
            raise self._error
        with self._lock:
            ready, self._ready, self._discarded = self._ready, None, True
        if ready is None:
            return None, False, self._taken
        return ready[0], ready[1], False

    def discard(self) -> None:
        """The task ends without using it: release it now or, if it is still warming up, when it is done."""
        with self._lock:
            ready, self._ready, self._discarded = self._ready, None, True
        if ready is not None:
            ready[0].release()


def _still_free(options: WriterOptions, transactional_id: str) -> Callable[[], None]:
    """Raises :class:`_IdTaken` if ``transactional_id`` holds an open transaction now."""
    def check() -> None:
        if cached_session(options.connection).describe([transactional_id])[transactional_id].state == TxnState.ONGOING:
            raise _IdTaken(transactional_id)
    return check


def _open_transaction(options: WriterOptions, candidates: list[str], timeout_ms: int, early: _EarlyProducer) -> _TaskTransaction:
    """A transaction on the first of this attempt's ``candidates`` (its ids, in order) that holds no open transaction.
    ``init_transactions`` on an id aborts its open transaction, which may be a participant another attempt
    prepared (a stage retry restarts attempt numbers; a straggler may hold an id of this generation). Each id is
    checked right before InitProducerId, after its producer's warm-up: another attempt that took it meanwhile is
    never fenced. ``early`` made the first candidate's producer before the rows came."""
    client, started, first_taken = early.take()  # client: None when the first candidate is taken
    for candidate in candidates[1:] if first_taken else candidates:
        try:
            return _TaskTransaction(candidate, options.producer_config(candidate, timeout_ms),
                                    options.topic or options.decision_log_topic, _still_free(options, candidate),
                                    options.write_engine, client, started)
        except _IdTaken:
            client, started = None, False  # released by _TaskTransaction; the next candidate gets a producer of its own
            continue
    raise KafkaEosWriteError(
        candidates[0], f"every id this task attempt may use ({', '.join(candidates)}) holds an open transaction.",
        "other attempts of this partition are still writing; Spark retries the task",
    )


class _IdTaken(Exception):
    """Another task attempt opened a transaction on the id between its check and our InitProducerId."""


class _TaskTransaction:
    """A transactional producer with one open transaction: produce, then prepare or abort."""

    def __init__(self, transactional_id: str, config: Mapping[str, object], topic: str,
                 before_init: Callable[[], None] | None = None, engine: Engine = "auto", client: ProducerClient | None = None,
                 started: bool = False) -> None:
        """``client``: one :func:`~spark_kafka_eos._internal.write.producers.open_producer` made for ``transactional_id``
        (and maybe warmed up, or ``started``) before."""
        self._transactional_id = transactional_id
        if client is None:
            client, started = open_producer(config, engine), False
        try:
            if not started:
                client.start(topic, OPERATION_TIMEOUT_S, before_init)
            client.begin()
        except BaseException as exc:
            # Nothing is produced yet, so no transaction is open: free the producer now, not when the error is dropped.
            client.release()
            if isinstance(exc, ClientCallError):
                raise write_error(transactional_id, "init_transactions / begin_transaction", [(None, None, exc.error, 0)]) from None
            raise
        self._client: ProducerClient | None = client

    @property
    def transactional_id(self) -> str:
        return self._transactional_id

    @property
    def identity(self) -> tuple[int, int] | None:
        """Producer id and epoch, once librdkafka's statistics have reported them."""
        return self._live().identity

    def produce(self, batch: pa.RecordBatch, columns: InputColumns, topic_option: str | None) -> None:
        client = self._live()
        client.produce(batch, columns, topic_option, self._transactional_id, OPERATION_TIMEOUT_S)
        client.poll(0)
        self._raise_on_failed_delivery()  # stop writing into a transaction that can only be aborted

    def prepare(self, transaction_timeout_ms: int) -> tuple[PreparedTxnState, tuple[PartitionCount, ...], Position | None, str | None]:
        """Flush, check every delivery, read the producer id and epoch, and drop the producer unclosed.
        Also returns where the first record landed (the participant's probe), and its digest."""
        self._flush(transaction_timeout_ms / 1000 + 5)
        producer_id, epoch = self.wait_for_identity()
        deliveries = self._live().deliveries()
        client, self._client = self._live(), None
        client.release()  # the transaction stays open
        prepared = PreparedTxnState(self._transactional_id, producer_id, epoch)
        return prepared, deliveries.counts(), deliveries.first, deliveries.first_digest

    def _flush(self, timeout_s: float) -> None:
        """Wait for every delivery report. After a failed delivery librdkafka holds the remaining records
        until the transaction is aborted, so a plain flush() would wait out its whole timeout: check often."""
        client = self._live()
        deadline = time.monotonic() + timeout_s
        while True:
            unflushed = client.flush(_FLUSH_SLICE_S)
            self._raise_on_failed_delivery()
            if not unflushed:
                return
            if time.monotonic() > deadline:
                raise write_error(self._transactional_id, f"{unflushed} records were still unacknowledged after the flush",
                                  [(None, None, ClientError.local(KafkaErrorCode.MSG_TIMED_OUT), unflushed)])

    def wait_for_identity(self) -> tuple[int, int]:
        """The producer id and epoch, waiting for the first statistics that have them if none came yet."""
        identity = _identity_within(self._live(), _IDENTITY_TIMEOUT_S)
        if identity is None:
            raise KafkaEosWriteError(
                self._transactional_id, f"librdkafka reported no statistics (producer id, epoch) in {_IDENTITY_TIMEOUT_S:g} s.",
                "check that the brokers are healthy; Spark retries the task",
            )
        return identity

    def _raise_on_failed_delivery(self) -> None:
        client = self._live()
        if client.failed():
            raise client.deliveries().error(self._transactional_id, "delivery")

    def abort(self) -> tuple[int, int] | None:
        """Abort the open transaction (best effort: what stays open is aborted by the driver's recovery).
        Returns the producer id and epoch it had, if known, for :func:`_ensure_aborted`."""
        client, self._client = self._client, None
        if client is None:
            return None
        identity = None
        try:
            identity = _identity_within(client, _ABORT_IDENTITY_WAIT_S)
            if not client.failed():
                # librdkafka must not abort with records (or their AddPartitionsToTxn) still in flight. After a
                # failed delivery it holds the rest until the abort, so there is nothing to wait for.
                client.flush(_ABORT_FLUSH_S)
            client.abort(OPERATION_TIMEOUT_S)
        except ClientCallError as exc:
            log.warning("could not abort transaction %s (%s); the driver's recovery aborts it",
                        self._transactional_id, exc.error.description)
        finally:
            client.release()
        return identity

    def _live(self) -> ProducerClient:
        if self._client is None:
            raise RuntimeError(f"the transaction of {self._transactional_id} is already prepared or aborted")
        return self._client


def _identity_within(client: ProducerClient, timeout_s: float) -> tuple[int, int] | None:
    """The producer id and epoch, waiting up to ``timeout_s`` for the first statistics that have them."""
    deadline = time.monotonic() + timeout_s
    while (identity := client.identity) is None and time.monotonic() < deadline:
        client.poll(STATS_INTERVAL_MS / 1000)
    return identity


class _SourcePositions:
    """Per source partition, over every batch: the first source offset written and the next one to
    consume (max written + 1)."""

    def __init__(self) -> None:
        self._first: dict[tuple[str, int], int] = {}
        self._next: dict[tuple[str, int], int] = {}

    def add(self, batch: pa.RecordBatch) -> None:
        positions = pa.Table.from_batches([batch.select([SOURCE_TOPIC, SOURCE_PARTITION, SOURCE_OFFSET])])
        bounds = positions.group_by([SOURCE_TOPIC, SOURCE_PARTITION]).aggregate([(SOURCE_OFFSET, "min"), (SOURCE_OFFSET, "max")])
        columns = (bounds.column(name).to_pylist()
                   for name in (SOURCE_TOPIC, SOURCE_PARTITION, f"{SOURCE_OFFSET}_min", f"{SOURCE_OFFSET}_max"))
        for topic, partition, lowest, highest in zip(*columns):
            if topic is not None and partition is not None and lowest is not None and highest is not None:
                key = (topic, partition)
                self._first[key] = min(self._first.get(key, lowest), lowest)
                self._next[key] = max(self._next.get(key, 0), highest + 1)

    def first_offsets(self) -> tuple[SourceOffset, ...]:
        return tuple((topic, partition, offset) for (topic, partition), offset in sorted(self._first.items()))

    def next_offsets(self) -> tuple[SourceOffset, ...]:
        return tuple((topic, partition, offset) for (topic, partition), offset in sorted(self._next.items()))
