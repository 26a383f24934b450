"""An in-memory model of the Kafka facts the write path relies on, for model-based tests of the real
coordinator, ownership and recovery code (tests/unit/test_operator_model.py), without a broker.

Richer than tests/unit/fakes.py: every transactional id (the tasks' and ``<prefix>-coordinator``) has a
producer id, an epoch and a state as the transaction coordinator keeps them (transaction protocol v1: the
epoch moves on InitProducerId and when the broker aborts a timed-out transaction, never per commit), and

- a clock (milliseconds, the broker's and the driver's alike) that the test advances, and that every
  ``time.sleep`` of the code under test advances too (see :class:`FakeTime`): open transactions are aborted
  by the broker ``transaction.timeout.ms`` after they began, an id's state is forgotten
  ``transactional.id.expiration.ms`` after its last transaction (then ``NotFound``; an InitProducerId
  makes it ``Empty``), a memberless group's offsets ``offsets.retention.minutes`` after their last commit;
- the decision log as the list of its committed records (deleting or re-creating the topic drops them), and
  its records written in the coordinator's transaction, which commit or abort with it;
- consumer group offsets (with the metadata a decision leaves on them), committed in the decision's transaction;
- the sink: every record the tasks produced, each tagged with what it carries (``data_id``) and which run
  attempt wrote it (``tag``); a read_committed reader sees those of committed transactions (:meth:`KafkaModel.sink`).

- the sink topic's cleanup: retention moves a partition's start past records, compaction removes records
  (both only below the last stable offset), and DescribeConfigs on the topic may be denied; the real
  visibility check (``visibility.committed_record_at``) reads the model through :func:`visibility_seams`.
  What a reader of the sink *saw* (:meth:`KafkaModel.sink`) counts records removed since: exactly-once is
  about what was delivered, not what the broker still keeps.

Not modelled: several partitions of the log and compaction (only the last record of a prefix is ever read),
the log's index group, chunked records, the coordinator producer kept for reuse (every operation fences anew, as
drivers in separate processes do), librdkafka's own retries, and the Prepare* states (EndTxn completes at once).
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace

import pyarrow as pa
from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import ConfigResource

import spark_kafka_eos._internal.decision_log.records as log_record_module
from spark_kafka_eos._internal.decision_log.coordinator_id import COORDINATOR_TRANSACTION_TIMEOUT_MS, coordinator_transactional_id
from spark_kafka_eos._internal.decision_log.group_marker import GroupMarker
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog, RecordNotCommittedError
from spark_kafka_eos._internal.decision_log.records import LogRecord
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos._internal.txn.session import (
    PreparedTxnState,
    TxnDescription,
    TxnFencedError,
    TxnInvalidStateError,
    TxnListing,
    TxnState,
)
from spark_kafka_eos._internal.write.visibility import record_digest
from spark_kafka_eos.errors import KafkaEosDecisionLogError
from tests.unit.fakes import NothingToClose

DAY_MS = 86_400_000
TRANSACTION_TIMEOUT_MS = 60_000
"""The tasks' transaction.timeout.ms."""
TRANSACTIONAL_ID_EXPIRATION_MS = 7 * DAY_MS
OFFSETS_RETENTION_MS = 7 * DAY_MS
MAX_PRODUCER_EPOCH = 5
"""Kafka's is Short.MAX_VALUE - 1: an InitProducerId that would pass it gives the id a new producer id at epoch 0
(KIP-360/KIP-890). The model's is small, so that sequences reach it (Flink's recovery broke there, FLINK-40689)."""
OUTPUT_TOPIC = "out"
OUTPUT_PARTITIONS = 2
SOURCE_TOPIC = "in"

Instance = tuple[str, int, int]
"""One transaction: (transactional id, producer id, producer epoch)."""


class DriverCrash(BaseException):
    """An injected fault: the driver process dies at this point. A BaseException, so that no ``except Exception``
    of the code under test goes on as if it were an error it can handle."""


class TaskFailed(Exception):
    """A task attempt could not open a transaction (every id it may use is held)."""


@dataclass
class TxnMeta:
    """The transaction coordinator's state of one transactional id."""

    producer_id: int
    producer_epoch: int
    state: TxnState
    timeout_ms: int
    start_ms: int = -1
    last_update_ms: int = 0

    @property
    def instance_key(self) -> tuple[int, int]:
        return self.producer_id, self.producer_epoch


@dataclass(frozen=True)
class OutputRecord:
    """A record a task produced into the sink's topic, in transaction ``instance``."""

    topic: str
    partition: int
    offset: int
    instance: Instance
    data_id: str
    """What the record carries: the same for every attempt that writes the same input."""
    tag: int
    """The run attempt that wrote it."""
    era: int
    """Bumped when an operator acknowledges a fresh start after the log was lost."""

    @property
    def key(self) -> str:
        return self.data_id

    @property
    def value(self) -> str:
        return f"{self.tag}#{self.instance}"

    @property
    def digest(self) -> str:
        """As the task records its probe's (visibility.record_digest of its key and value)."""
        return record_digest(self.key, self.value)


@dataclass
class PendingDecision:
    """Records written in the coordinator's open transaction, not yet committed."""

    instance: Instance
    records: list[LogRecord] = field(default_factory=list)
    archives: dict[int, tuple[str, tuple[tuple[str, int], ...]]] = field(default_factory=dict)
    group_offsets: dict[str, dict[tuple[str, int], tuple[int, str]]] = field(default_factory=dict)
    announcement: tuple[str, tuple[tuple[str, int, int], ...]] | None = None
    """A sweep's announcement on a prefix without records: (prefix, the transactions it aborts)."""


class KafkaModel:
    """The broker side: transactions, the decision log, consumer groups, the sink's topic, and the clock."""

    def __init__(self, clock_ms: int = 1_700_000_000_000) -> None:
        self.clock_ms = clock_ms
        self.txns: dict[str, TxnMeta] = {}
        self.outcomes: dict[Instance, str] = {}
        """Every transaction ever begun: 'ongoing', 'committed' or 'aborted'."""
        self.aborted_by_clients: set[Instance] = set()
        """Transactions a client aborted (EndTxn(abort), or InitProducerId over an open one): not the broker's timeout."""
        self.output: dict[tuple[str, int], list[OutputRecord]] = {}
        self.log_exists = False
        self.log: list[LogRecord] = []
        self.archives: dict[int, tuple[str, tuple[tuple[str, int], ...]]] = {}
        """History archive records of the log: offset -> (value, runs)."""
        self.announcements: dict[str, tuple[tuple[str, int, int], ...]] = {}
        """The log's last sweep announcement per prefix (a key of its own, beside the prefix's records)."""
        self.log_incarnation = 0
        self._log_offsets = itertools.count()
        self.pending: dict[str, PendingDecision] = {}
        """Coordinator id -> what its open transaction wrote to the log."""
        self.groups: dict[str, dict[tuple[str, int], tuple[int, str, int]]] = {}
        """group -> (topic, partition) -> (offset, metadata, committed at ms)."""
        self.group_movers: dict[str, str] = {}
        """group -> the prefix whose decision (or reset) last committed its offsets (kept when they expire)."""
        self.decision_fault: str | None = None
        """Injected into the next decision append: 'lost_response', 'not_landed', 'die_mid_write',
        'lost_response_recovered' (the response is lost and another driver finishes the decision)."""
        self.on_lost_response: Callable[[], None] | None = None
        self._producer_ids = itertools.count(1000)
        self.events: list[str] = []
        self.dying = False
        self.log_start: dict[tuple[str, int], int] = {}
        """The sink's partitions' first offsets: retention moved them past the records before."""
        self.compacted: set[tuple[str, int, int]] = set()
        """Records of the sink that compaction removed."""
        self.cleanup_policy = "delete"
        self.describe_configs_allowed = True

    # -- a dying driver ---------------------------------------------------------------------
    def crash(self, why: str) -> DriverCrash:
        """The driver dies: until the test picks up the pieces (:meth:`buried`), nothing it calls reaches Kafka
        (a ``finally`` of the code under test must not act for a process that is gone)."""
        self.dying = True
        return DriverCrash(why)

    def buried(self) -> None:
        self.dying = False

    def _alive(self) -> None:
        if self.dying:
            raise DriverCrash("the driver is dead")

    # -- time -------------------------------------------------------------------------------
    def advance(self, ms: int) -> None:
        self.clock_ms += max(ms, 0)
        self.tick()

    def tick(self) -> None:
        """What the broker does on its own as time passes."""
        now = self.clock_ms
        for txn_id, meta in list(self.txns.items()):
            if meta.state == TxnState.ONGOING and now > meta.start_ms + meta.timeout_ms:
                self._abort_instance(txn_id, meta)
                meta.producer_epoch += 1  # the coordinator fences the producer as it aborts
                meta.state = TxnState.COMPLETE_ABORT
                meta.last_update_ms = meta.start_ms + meta.timeout_ms
                self.events.append(f"timeout:{txn_id}")
            elif meta.state != TxnState.ONGOING and now - meta.last_update_ms > TRANSACTIONAL_ID_EXPIRATION_MS:
                del self.txns[txn_id]
                self.events.append(f"expired:{txn_id}")
        for group, offsets in list(self.groups.items()):
            kept = {tp: o for tp, o in offsets.items() if now - o[2] <= OFFSETS_RETENTION_MS}
            if kept:
                self.groups[group] = kept
            else:
                del self.groups[group]

    # -- transactions -----------------------------------------------------------------------
    def describe(self, txn_id: str) -> TxnDescription:
        self._alive()
        self.tick()
        meta = self.txns.get(txn_id)
        if meta is None:
            return TxnDescription(txn_id, TxnState.NOT_FOUND, -1, -1, 0, -1)
        return TxnDescription(txn_id, meta.state, meta.producer_id, meta.producer_epoch, meta.timeout_ms, meta.start_ms)

    def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int = -1, epoch: int = -1) -> tuple[int, int]:
        """InitProducerId: aborts an open transaction, bumps the epoch; the id is then Empty. With an expected
        producer id and epoch (KIP-360), fails unless the id still has them."""
        self._alive()
        self.tick()
        meta = self.txns.get(txn_id)
        if producer_id >= 0 and (meta is None or meta.instance_key != (producer_id, epoch)):
            raise TxnFencedError("PRODUCER_FENCED: the id moved on", txn_id, "InitProducerId")
        if meta is None:
            meta = self.txns[txn_id] = TxnMeta(next(self._producer_ids), -1, TxnState.EMPTY, timeout_ms)
        if meta.state == TxnState.ONGOING:
            self._abort_instance(txn_id, meta)
            self.aborted_by_clients.add(self._instance(txn_id, meta))
            meta.producer_epoch += 1  # the fence's abort, with the bumped epoch
        meta.producer_epoch += 1
        if meta.producer_epoch > MAX_PRODUCER_EPOCH:
            meta.producer_id, meta.producer_epoch = next(self._producer_ids), 0
            self.events.append(f"producer-id-rolled:{txn_id}")
        meta.state = TxnState.EMPTY
        meta.timeout_ms = timeout_ms
        meta.start_ms = -1
        meta.last_update_ms = self.clock_ms
        self.events.append(f"init:{txn_id}")
        return meta.producer_id, meta.producer_epoch

    def begin(self, state: PreparedTxnState) -> None:
        """The first write of a transaction (AddPartitionsToTxn / AddOffsetsToTxn) by that producer."""
        meta = self._current(state, "AddPartitionsToTxn")
        if meta.state != TxnState.ONGOING:
            meta.state = TxnState.ONGOING
            meta.start_ms = self.clock_ms
            meta.last_update_ms = self.clock_ms
            self.outcomes[self._instance(state.transactional_id, meta)] = "ongoing"

    def end_txn(self, state: PreparedTxnState, commit: bool) -> None:
        """EndTxn: idempotent for the same outcome of the same producer id and epoch."""
        self.tick()
        request = "EndTxn(commit)" if commit else "EndTxn(abort)"
        meta = self._current(state, request)
        outcome = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if meta.state == outcome:
            return
        if meta.state != TxnState.ONGOING:
            raise TxnInvalidStateError(f"INVALID_TXN_STATE: {request} on {meta.state}", state.transactional_id, request)
        if commit:
            self._commit_instance(state.transactional_id, meta)
        else:
            self._abort_instance(state.transactional_id, meta)
            self.aborted_by_clients.add(self._instance(state.transactional_id, meta))
        meta.state = outcome
        meta.last_update_ms = self.clock_ms
        self.events.append(f"{'commit' if commit else 'abort'}:{state.transactional_id}")

    def _current(self, state: PreparedTxnState, request: str) -> TxnMeta:
        self._alive()
        self.tick()
        meta = self.txns.get(state.transactional_id)
        if meta is None or meta.instance_key != (state.producer_id, state.producer_epoch):
            raise TxnFencedError(f"PRODUCER_FENCED: {request} by producer {state.producer_id} epoch {state.producer_epoch}",
                                 state.transactional_id, request)
        return meta

    @staticmethod
    def _instance(txn_id: str, meta: TxnMeta) -> Instance:
        return txn_id, meta.producer_id, meta.producer_epoch

    def _commit_instance(self, txn_id: str, meta: TxnMeta) -> None:
        self.outcomes[self._instance(txn_id, meta)] = "committed"
        pending = self.pending.pop(txn_id, None)
        if pending is not None:
            self.log.extend(pending.records)
            self.archives.update(pending.archives)
            if pending.announcement is not None:
                self.announcements[pending.announcement[0]] = pending.announcement[1]
            for group, offsets in pending.group_offsets.items():
                if pending.records:
                    self.group_movers[group] = pending.records[-1].prefix
                stored = self.groups.setdefault(group, {})
                for tp, (offset, metadata) in offsets.items():
                    stored[tp] = (offset, metadata, self.clock_ms)

    def _abort_instance(self, txn_id: str, meta: TxnMeta) -> None:
        self.outcomes[self._instance(txn_id, meta)] = "aborted"
        self.pending.pop(txn_id, None)

    def open_ids(self, belongs: Callable[[str], bool]) -> list[str]:
        self.tick()
        return sorted(t for t, m in self.txns.items() if m.state == TxnState.ONGOING and belongs(t))

    # -- the sink's topic -------------------------------------------------------------------
    def produce(self, state: PreparedTxnState, partition: int, data_id: str, tag: int, era: int) -> OutputRecord:
        self.begin(state)
        records = self.output.setdefault((OUTPUT_TOPIC, partition), [])
        record = OutputRecord(OUTPUT_TOPIC, partition, len(records), (state.transactional_id, state.producer_id, state.producer_epoch),
                              data_id, tag, era)
        records.append(record)
        return record

    def sink(self) -> list[OutputRecord]:
        """What a read_committed reader of the sink's topic sees."""
        return [r for records in self.output.values() for r in records if self.outcomes.get(r.instance) == "committed"]

    def sink_counts(self) -> Counter[tuple[int, str]]:
        """(era, data id) -> how often a read_committed reader sees it."""
        return Counter((r.era, r.data_id) for r in self.sink())

    def stable_end(self, topic: str, partition: int) -> int:
        """The partition's last stable offset: its first record of an open transaction, or its end."""
        records = self.output.get((topic, partition), [])
        return next((r.offset for r in records if self.outcomes.get(r.instance) == "ongoing"), len(records))

    def apply_retention(self) -> None:
        """Retention deletes every segment of the sink below its partitions' last stable offset."""
        for topic, partition in self.output:
            self.log_start[(topic, partition)] = max(self.log_start.get((topic, partition), 0), self.stable_end(topic, partition))

    def compact(self) -> None:
        """The cleaner runs over the sink below its last stable offsets; each key in the model is written once per
        run attempt, so say it removes every record there but the last (superseded, or an aborted one)."""
        for (topic, partition), records in self.output.items():
            self.compacted.update((topic, partition, r.offset) for r in records[:max(self.stable_end(topic, partition) - 1, 0)])

    def read_committed(self, topic: str, partition: int, start: int, end: int) -> list[OutputRecord]:
        """What a read_committed reader of offsets [start, end) gets now (records removed since are gone)."""
        first, stable = self.log_start.get((topic, partition), 0), self.stable_end(topic, partition)
        return [r for r in self.output.get((topic, partition), [])[max(start, first):min(end, stable)]
                if (topic, partition, r.offset) not in self.compacted and self.outcomes.get(r.instance) == "committed"]

    # -- the decision log -------------------------------------------------------------------
    def delete_log(self) -> None:
        """The log topic is deleted (or re-created, or the option names another topic): its records are gone."""
        self.log_exists = False
        self.log = []
        self.archives = {}
        self.announcements = {}
        self.log_incarnation += 1
        self._log_offsets = itertools.count()
        for pending in self.pending.values():
            pending.records.clear()

    def last(self, prefix: str) -> LogRecord | None:
        return next((r for r in reversed(self.log) if r.prefix == prefix), None)

    def next_log_offset(self) -> int:
        return next(self._log_offsets)

    def group_offsets(self, group: str) -> dict[tuple[str, int], tuple[int, str]]:
        self.tick()
        return {tp: (o, m) for tp, (o, m, _) in self.groups.get(group, {}).items()}


class FakeTime:
    """Stands in for the ``time`` module of the code under test: its clocks are the model's, and a sleep
    advances the model's clock (so retries and waits cost no real time, and transactions age meanwhile)."""

    def __init__(self, model: KafkaModel) -> None:
        self.model = model

    def time(self) -> float:
        return self.model.clock_ms / 1000

    def monotonic(self) -> float:
        return self.model.clock_ms / 1000

    def sleep(self, seconds: float) -> None:
        self.model.advance(int(seconds * 1000) or 1)


class ModelSession(NothingToClose):
    """The TransactionSession subset the coordinator, recovery and the CLI use."""

    def __init__(self, model: KafkaModel) -> None:
        self.model = model

    def describe(self, ids: Iterable[str]) -> dict[str, TxnDescription]:
        return {txn_id: self.model.describe(txn_id) for txn_id in dict.fromkeys(ids)}

    def list_transactions(self, state_filters: Iterable[str] = (), producer_id_filters: Iterable[int] = (),
                          id_prefix: str | None = None) -> list[TxnListing]:
        self.model._alive()
        self.model.tick()
        wanted = {str(s) for s in state_filters}
        return [TxnListing(t, m.producer_id, m.state) for t, m in sorted(self.model.txns.items())
                if (not wanted or m.state.value in wanted) and t.startswith(id_prefix or "")]

    def commit(self, state: PreparedTxnState) -> None:
        self.model.end_txn(state, commit=True)

    def abort(self, state: PreparedTxnState) -> None:
        self.model.end_txn(state, commit=False)

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int]:
        return self.model.init_producer_id(transactional_id, timeout_ms, producer_id, producer_epoch)

    def wait_settled(self, ids: Sequence[str], timeout_s: float | None = None) -> dict[str, TxnDescription]:
        return self.describe(ids)


class ModelDecisionLog:
    """The KafkaDecisionLog subset the coordinator uses, over the model: one instance per operation, which fences
    the coordinator id (InitProducerId) the first time it needs it, as a new coordinator producer does."""

    def __init__(self, model: KafkaModel) -> None:
        self.model = model
        self.holder: PreparedTxnState | None = None
        self.fenced_as: PreparedTxnState | None = None
        # The bookkeeping KafkaDecisionLog keeps for keep_history_mark (when the code under test has it).
        self._id_committed = True
        self._last_seen: dict[str, LogRecord] = {}

    keep_history_mark = getattr(KafkaDecisionLog, "keep_history_mark", lambda self, prefix: None)
    """The real KafkaDecisionLog's: after an operation that fenced and committed nothing, re-append the last record seen."""

    def ensure_topic(self) -> None:
        if not self.model.log_exists:
            self.model.log_exists = True  # created, empty

    def fence(self, prefix: str) -> None:
        """As KafkaDecisionLog's: a fence that replaces this log's own earlier one must take the id's next epoch."""
        if self.holder is None:
            txn_id = coordinator_transactional_id(prefix)
            pid, epoch = self.model.init_producer_id(txn_id, COORDINATOR_TRANSACTION_TIMEOUT_MS)
            self.holder = PreparedTxnState(txn_id, pid, epoch)
            self._id_committed = False
            self._last_seen.pop(prefix, None)
            refuse = getattr(KafkaDecisionLog, "_refuse_unless_successor", lambda prefix, before, now: None)
            try:
                refuse(prefix, self.fenced_as, self.holder)
            except KafkaEosDecisionLogError:
                self.holder = None  # as KafkaDecisionLog: the refused producer is never used
                raise
            self.fenced_as = self.holder

    def fenced_last(self, prefix: str, anew: bool = False) -> LogRecord | None:
        """As KafkaDecisionLog's: fence (anew: the log's own producer too), read the last record, mark a new fence at once."""
        if anew:
            self.holder = self.fenced_as = None
            self._last_seen.pop(prefix, None)
        self.fence(prefix)
        last = self.last(prefix)
        self.keep_history_mark(prefix)
        return last

    def last(self, prefix: str) -> LogRecord | None:
        self.model._alive()
        return self._last(prefix)

    def records_since(self, since: int = 0) -> tuple[list[LogRecord], int]:
        """Every committed record of every prefix, in log order (the model's log is not compacted)."""
        self.model._alive()
        return list(self.model.log[since:]), len(self.model.log)

    def _last(self, prefix: str) -> LogRecord | None:
        """The last committed record; an open coordinator transaction with records of the prefix is waited out
        (the index group's offset is unstable until it ends; the broker aborts it after its timeout)."""
        txn_id = coordinator_transactional_id(prefix)
        pending = self.model.pending.get(txn_id)
        meta = self.model.txns.get(txn_id)
        if pending is not None and meta is not None and meta.state == TxnState.ONGOING:
            self.model.advance(meta.start_ms + meta.timeout_ms + 1 - self.model.clock_ms)
        if not self.model.log_exists:
            self.ensure_topic()  # KafkaDecisionLog.last looks at the topic again before scanning
            return None
        last = self.model.last(prefix)
        if last is not None:
            self._last_seen[prefix] = last
        return last

    def _begin(self, prefix: str, request: str) -> PreparedTxnState:
        self.fence(prefix)
        assert self.holder is not None
        try:
            self.model.begin(self.holder)
        except TxnFencedError as fenced:
            self.holder = None
            raise RecordNotCommittedError(f"Writing to the decision log failed: {fenced}") from None
        self._id_committed = False
        return self.holder

    def append(self, record: LogRecord, group_offsets: Mapping[tuple[str, int], int] | None = None,
               before_commit: Callable[[], None] | None = None, commit_by: float | None = None) -> None:
        holder = self._begin(record.prefix, "append")
        pending = self._pending(holder)
        self.ensure_topic()
        pending.records.append(record)
        if group_offsets and record.consumer_group:
            marker = GroupMarker("_kafka_eos_decisions", record.prefix, record.epoch_id).to_metadata()
            pending.group_offsets[record.consumer_group] = {tp: (o, marker) for tp, o in group_offsets.items()}
        if before_commit is not None:
            try:
                before_commit()
            except Exception:
                self._abort(holder)
                raise
        fault = None
        if record.kind == "decision" and self.model.decision_fault is not None:
            fault, self.model.decision_fault = self.model.decision_fault, None
        if fault == "die_mid_write":
            raise self.model.crash("the driver died with its decision written, not committed")
        if fault == "not_landed":
            self._abort(holder)
            raise KafkaEosDecisionLogError("The decision could not be committed: Broker: Producer attempted an operation with an old epoch")
        self._commit(holder, record.prefix)
        self._last_seen[record.prefix] = record
        if fault in ("lost_response", "lost_response_recovered"):
            # As KafkaDecisionLog, when its commit fails: the outcome (and so the prefix's last record) is unknown.
            self.holder, self._id_committed = None, False
            self._last_seen.pop(record.prefix, None)
            if fault == "lost_response_recovered" and self.model.on_lost_response is not None:
                self.model.on_lost_response()
            raise KafkaEosDecisionLogError("The decision could not be committed: Local: Timed out")

    def _pending(self, holder: PreparedTxnState) -> PendingDecision:
        return self.model.pending.setdefault(holder.transactional_id, PendingDecision(
            (holder.transactional_id, holder.producer_id, holder.producer_epoch)))

    def _commit(self, holder: PreparedTxnState, prefix: str) -> None:
        """Commit the coordinator's transaction; a refusal fails as KafkaDecisionLog's commit does."""
        try:
            self.model.end_txn(holder, commit=True)
        except (TxnFencedError, TxnInvalidStateError) as err:
            self.holder = None
            self._last_seen.pop(prefix, None)
            raise KafkaEosDecisionLogError(f"The decision could not be committed: {err}") from None
        self._id_committed = True

    def _abort(self, holder: PreparedTxnState) -> None:
        try:
            self.model.end_txn(holder, commit=False)
        except (TxnFencedError, TxnInvalidStateError):
            pass
        self.holder = None

    def archive(self, prefix: str, history: tuple[tuple[str, int], ...],
                archives: tuple[tuple[int, str], ...]) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[int, str], ...]]:
        """As KafkaDecisionLog.archive: once the history outgrows its limit, its oldest runs are committed to an archive
        record of their own (in a coordinator transaction) and dropped from the history."""
        overflow = getattr(log_record_module, "archive_overflow", lambda history: None)(history)
        if overflow is None:
            return history, archives
        old, kept = overflow
        holder = self._begin(prefix, "archive")
        self.ensure_topic()
        offset = self.model.next_log_offset()
        value = f"{prefix}/archive/{len(archives)}:{old}"
        self._pending(holder).archives[offset] = (value, tuple(old))
        self._commit(holder, prefix)
        return kept, (*archives, (offset, value))

    def archived_runs(self, record: LogRecord) -> tuple[tuple[str, int], ...]:
        """As KafkaDecisionLog.archived_runs: an archive that is gone (the log re-created) is an error."""
        runs: list[tuple[str, int]] = []
        for offset, expected in getattr(record, "archives", ()):
            found = self.model.archives.get(offset)
            if found is None or found[0] != expected:
                raise KafkaEosDecisionLogError(
                    f"The archive of prefix {record.prefix}'s oldest runs at offset {offset} of the decision log is gone or "
                    "changed: a re-run of a writeId older than its last runs could not be recognised. Nothing was written.")
            runs += found[1]
        return tuple(runs)

    def prove_owner(self, prefix: str, aborting: Sequence[tuple[str, int, int]] = ()) -> None:
        """A coordinator transaction that registers an index offset and is aborted: fails if fenced. With
        ``aborting`` (where the code under test passes it): commits their announcement instead."""
        try:
            holder = self._begin(prefix, "AddOffsetsToTxn")
        except RecordNotCommittedError as err:
            raise KafkaEosDecisionLogError(f"This driver no longer owns prefix {prefix}: {err}") from None
        if not aborting:
            self.model.end_txn(holder, commit=False)
            return
        self.ensure_topic()
        self._pending(holder).announcement = (prefix, tuple(aborting))
        self._commit(holder, prefix)

    def sweep_announcement(self, prefix: str) -> tuple[tuple[str, int, int], ...]:
        """As KafkaDecisionLog's: the last announcement, read with a last() that found no record."""
        return () if self.model.last(prefix) is not None else self.model.announcements.get(prefix, ())

    def keep_for_reuse(self) -> None:
        """Nothing is kept: every operation fences anew, as drivers in separate processes do."""


def group_consumer_class(model: KafkaModel) -> type:
    """Stands in for confluent_kafka.Consumer in consumer_group.check_group_position: reads the model's groups."""

    class GroupConsumer:
        def __init__(self, config: Mapping[str, object]) -> None:
            self.group = str(config["group.id"])

        def committed(self, partitions: Sequence[KafkaTopicPartition], timeout: float | None = None) -> list[KafkaTopicPartition]:
            offsets = model.group_offsets(self.group)
            found = []
            for tp in partitions:
                offset, metadata = offsets.get((tp.topic, tp.partition), (-1001, ""))
                found.append(KafkaTopicPartition(tp.topic, tp.partition, offset, metadata=metadata) if metadata
                             else KafkaTopicPartition(tp.topic, tp.partition, offset))
            return found

        def close(self) -> None:
            pass

    return GroupConsumer


class SerialExecutor:
    """Stands in for ThreadPoolExecutor in recovery: the same calls, one after another (deterministic)."""

    def __init__(self, max_workers: int | None = None) -> None:
        pass

    def __enter__(self) -> SerialExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def map(self, fn: Callable[..., object], *iterables: Iterable[object]) -> Iterable[object]:
        return [fn(*args) for args in zip(*iterables, strict=True)]

    def submit(self, fn: Callable[..., object], *args: object) -> Future[object]:
        """Runs ``fn`` now (the coordinator's sweep listing: listed at submit, right after the decision)."""
        done: Future[object] = Future()
        try:
            done.set_result(fn(*args))
        except Exception as exc:  # noqa: BLE001 - handed over as the future's, as a thread pool would
            done.set_exception(exc)
        return done


def visibility_seams(model: KafkaModel) -> dict[str, object]:
    """Stand-ins for the reads of ``spark_kafka_eos._internal.write.visibility``, over the model: its offset range read,
    its point reader's watermarks, its admin client's DescribeConfigs (denied, when the model says so) and ListOffsets."""

    def read_offset_range(options: object, offsets: OffsetRange) -> Iterator[pa.RecordBatch]:
        found = model.read_committed(offsets.topic, offsets.partition, offsets.start, offsets.end)
        yield pa.record_batch({"offset": [r.offset for r in found], "key": [r.key for r in found],
                               "value": [r.value for r in found]})

    class PointReader:
        def get_watermark_offsets(self, tp: KafkaTopicPartition, timeout: float | None = None,
                                  cached: bool = False) -> tuple[int, int]:
            return model.log_start.get((tp.topic, tp.partition), 0), len(model.output.get((tp.topic, tp.partition), []))

    class Admin:
        def describe_configs(self, resources: Sequence[ConfigResource], request_timeout: float | None = None) -> dict[ConfigResource, Future[object]]:
            answer: Future[object] = Future()
            if model.describe_configs_allowed:
                answer.set_result({"cleanup.policy": _ConfigEntry(model.cleanup_policy)})
            else:
                answer.set_exception(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
            return dict.fromkeys(resources, answer)

        def list_offsets(self, request: Mapping[KafkaTopicPartition, object], isolation_level: IsolationLevel | None = None,
                         request_timeout: float | None = None) -> dict[KafkaTopicPartition, Future[object]]:
            """The latest offsets asked for: the last stable offset under read_committed, else the end."""
            answers: dict[KafkaTopicPartition, Future[object]] = {}
            for tp in request:
                end = len(model.output.get((tp.topic, tp.partition), []))
                answers[tp] = answer = Future()
                answer.set_result(SimpleNamespace(offset=end if isolation_level == IsolationLevel.READ_UNCOMMITTED
                                                  else model.stable_end(tp.topic, tp.partition)))
            return answers

    reader, lock = PointReader(), threading.Lock()
    return {"read_offset_range": read_offset_range, "point_reader": lambda connection: (reader, lock),
            "admin_client": lambda connection: Admin()}


@dataclass(frozen=True)
class _ConfigEntry:
    value: str
