"""In-memory stand-ins for the coordinator's seams (decision log, transaction session), so that
interleavings of drivers, stragglers and failures can be played out exactly, without a broker."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Self, TypedDict

from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.config.writer import WriterOptions
from spark_kafka_eos._internal.decision_log.protocol import DecisionLog
from spark_kafka_eos._internal.decision_log.records import Aborting, ArchiveRef, HistoryEntry, LogRecord, Participant, archive_overflow
from spark_kafka_eos._internal.txn.protocol import TransactionClient
from spark_kafka_eos._internal.txn.session import (
    PreparedTxnState,
    TxnDescription,
    TxnFencedError,
    TxnInvalidStateError,
    TxnListing,
    TxnState,
    TxnTimeoutError,
)

TIMEOUT_MS = 60_000
_producer_ids = itertools.count(1000)


@dataclass
class Cluster:
    """The transaction coordinator's state and the decision log, shared by every fake client."""

    clock_ms: int = 1_000_000
    txns: dict[str, TxnDescription] = field(default_factory=dict)
    records: list[LogRecord] = field(default_factory=list)
    coordinator_epoch: int = 0
    deciding: bool = False  # a decision-log append is between its writes and its commit
    events: list[str] = field(default_factory=list)
    transient_commit_failures: int = 0
    failing_appends: dict[str, Exception] = field(default_factory=dict)
    """Record kind -> error raised by append (after the record was stored when ``land_failed_appends``)."""
    land_failed_appends: bool = False
    append_failures_left: int = -1
    """How many more appends fail as ``failing_appends`` says (-1: all of them)."""
    on_list: Callable[[], None] | None = None
    after_landed_failure: Callable[[], None] | None = None
    """Runs once after a failed append that landed, before its error is raised (another driver acting)."""
    archives: list[tuple[HistoryEntry, ...]] = field(default_factory=list)
    """The decision log's archives of prefixes' oldest runs."""
    visible: set[str] = field(default_factory=set)
    """Transactional ids whose (committed) records a read_committed reader sees."""
    announcements: dict[str, tuple[Aborting, ...]] = field(default_factory=dict)
    """prefix -> what a sweep of it announced it aborts while it had no record."""

    def open_transaction(self, transactional_id: str, started_ms: int | None = None) -> PreparedTxnState:
        """A task that initialised ``transactional_id`` and wrote into a new transaction."""
        previous = self.txns.get(transactional_id)
        producer_id = previous.producer_id if previous else next(_producer_ids)
        epoch = previous.producer_epoch + 1 if previous else 0
        self.txns[transactional_id] = TxnDescription(
            transactional_id, TxnState.ONGOING, producer_id, epoch, TIMEOUT_MS, self.clock_ms if started_ms is None else started_ms
        )
        return PreparedTxnState(transactional_id, producer_id, epoch)

    def state(self, transactional_id: str) -> str:
        return self.txns[transactional_id].state

    def last(self, prefix: str) -> LogRecord | None:
        return next((r for r in reversed(self.records) if r.prefix == prefix), None)


class NothingToClose:
    """A fake of a client used as ``with client:`` that holds nothing to close."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class FakeSession(NothingToClose):
    """The subset of :class:`TransactionSession` the coordinator and recovery use."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def describe(self, ids: Iterable[str]) -> dict[str, TxnDescription]:
        found = {}
        for txn_id in ids:
            if txn_id.endswith("-coordinator"):  # the decision transaction: started now, on the broker's clock
                committed = self.cluster.records or self.cluster.announcements
                state = TxnState.ONGOING if self.cluster.deciding else TxnState.COMPLETE_COMMIT if committed else TxnState.EMPTY
                found[txn_id] = TxnDescription(txn_id, state, 1, self.cluster.coordinator_epoch, 60_000, self.cluster.clock_ms)
            else:
                found[txn_id] = self.cluster.txns.get(txn_id) or TxnDescription(txn_id, TxnState.NOT_FOUND, -1, -1, 0, -1)
        return found

    def list_transactions(self, state_filters: Iterable[str] = (), id_prefix: str | None = None) -> list[TxnListing]:
        """As a broker before ListTransactions v2 (KIP-1152) answers: ``id_prefix`` is not applied, every id is listed."""
        self.cluster.events.append("list")
        if self.cluster.on_list is not None:
            action, self.cluster.on_list = self.cluster.on_list, None
            action()
        wanted = set(state_filters)
        return [TxnListing(d.transactional_id, d.producer_id, d.state) for d in self.cluster.txns.values()
                if not wanted or d.state in wanted]

    def commit(self, state: PreparedTxnState) -> None:
        if self.cluster.transient_commit_failures:
            self.cluster.transient_commit_failures -= 1
            raise TxnTimeoutError("the coordinator did not answer in time", state.transactional_id, "EndTxn(commit)")
        self._end(state, TxnState.COMPLETE_COMMIT)

    def abort(self, state: PreparedTxnState) -> None:
        self._end(state, TxnState.COMPLETE_ABORT)

    def _end(self, state: PreparedTxnState, outcome: TxnState) -> None:
        d = self.cluster.txns.get(state.transactional_id)
        if d is None or (d.producer_id, d.producer_epoch) != (state.producer_id, state.producer_epoch):
            raise TxnFencedError("fenced", state.transactional_id, "EndTxn")
        if d.state == outcome:
            return
        if d.state != TxnState.ONGOING:
            raise TxnInvalidStateError(f"{d.state}", state.transactional_id, "EndTxn")
        self.cluster.events.append(f"{outcome.value}:{state.transactional_id}")
        self.cluster.txns[state.transactional_id] = replace(d, state=outcome)

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1, epoch: int = -1) -> tuple[int, int]:
        d = self.cluster.txns[transactional_id]
        if producer_id >= 0 and (d.producer_id, d.producer_epoch) != (producer_id, epoch):
            raise TxnFencedError("moved on", transactional_id, "InitProducerId")
        self.cluster.events.append(f"fence:{transactional_id}")
        state = TxnState.COMPLETE_ABORT if d.state == TxnState.ONGOING else d.state
        self.cluster.txns[transactional_id] = replace(d, state=state, producer_epoch=d.producer_epoch + 1)
        return d.producer_id, d.producer_epoch + 1

    def wait_settled(self, ids: Iterable[str], timeout_s: float | None = None) -> dict[str, TxnDescription]:
        return self.describe(ids)


class FakeDecisionLog:
    """A decision log whose coordinator id is fenced by the newest instance to call :meth:`fence`."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.producer_epoch: int | None = None

    def ensure_topic(self) -> None:
        pass

    def fence(self, prefix: str) -> None:
        if self.producer_epoch is None:
            self.cluster.coordinator_epoch += 1
            self.producer_epoch = self.cluster.coordinator_epoch
            self.cluster.events.append("fence-coordinator")

    def archive(self, prefix: str, history: tuple[HistoryEntry, ...],
                archives: tuple[ArchiveRef, ...]) -> tuple[tuple[HistoryEntry, ...], tuple[ArchiveRef, ...]]:
        """Archives kept in memory, by their index (as offset)."""
        overflow = archive_overflow(history)
        if overflow is None:
            return history, archives
        self.cluster.archives.append(overflow[0])
        return overflow[1], (*archives, (len(self.cluster.archives) - 1, ""))

    def archived_runs(self, record: LogRecord) -> tuple[HistoryEntry, ...]:
        return tuple(run for offset, _ in record.archives for run in self.cluster.archives[offset])

    def fenced_last(self, prefix: str, anew: bool = False) -> LogRecord | None:
        if anew:
            self.producer_epoch = None
        self.fence(prefix)
        return self.last(prefix)

    def keep_history_mark(self, prefix: str) -> None:
        pass  # the fake coordinator id reads as committed whenever the log has records

    def last(self, prefix: str) -> LogRecord | None:
        self.cluster.events.append("read")
        return self.cluster.last(prefix)

    def append(self, record: LogRecord, group_offsets: Mapping[tuple[str, int], int] | None = None,
               before_commit: Callable[[], None] | None = None, commit_by: float | None = None) -> None:
        self.fence(record.prefix)
        if self.producer_epoch != self.cluster.coordinator_epoch:
            raise TxnFencedError("the coordinator id was fenced by another driver", f"{record.prefix}-coordinator", "EndTxn")
        if before_commit is not None:
            self.cluster.deciding = True
            try:
                before_commit()
            finally:
                self.cluster.deciding = False
        failure = self.cluster.failing_appends.get(record.kind) if self.cluster.append_failures_left != 0 else None
        if failure is not None and self.cluster.append_failures_left > 0:
            self.cluster.append_failures_left -= 1
        if failure is not None and not self.cluster.land_failed_appends:
            raise failure
        self.cluster.records.append(record)
        self.cluster.events.append(f"append:{record.kind}")
        if failure is not None:
            action, self.cluster.after_landed_failure = self.cluster.after_landed_failure, None
            if action is not None:
                action()
            raise failure


    def records_since(self, since: int = 0) -> tuple[list[LogRecord], int]:
        return list(self.cluster.records[since:]), len(self.cluster.records)

    def keep_for_reuse(self) -> None:
        """Nothing is kept: every operation fences anew, as drivers in separate processes do."""

    def prove_owner(self, prefix: str, aborting: Sequence[Aborting] = ()) -> None:
        self.fence(prefix)
        if self.producer_epoch != self.cluster.coordinator_epoch:
            raise TxnFencedError("the coordinator id was fenced by another driver", f"{prefix}-coordinator", "AddOffsetsToTxn")
        if aborting:
            self.cluster.announcements[prefix] = tuple(aborting)

    def sweep_announcement(self, prefix: str) -> tuple[Aborting, ...]:
        return () if self.cluster.last(prefix) is not None else self.cluster.announcements.get(prefix, ())


class CoordinatorSeams(TypedDict):
    """The keyword arguments of :class:`TwoPhaseCommitCoordinator` that reach Kafka."""

    open_log: Callable[[WriterOptions], DecisionLog]
    session_of: Callable[[KafkaConnection], TransactionClient]
    visible: Callable[[Participant], bool]


def fake_seams(cluster: Cluster) -> CoordinatorSeams:
    """Keyword arguments for :class:`TwoPhaseCommitCoordinator`."""
    return {
        "open_log": lambda options: FakeDecisionLog(cluster),
        "session_of": lambda connection: FakeSession(cluster),
        "visible": lambda participant: participant.transactional_id in cluster.visible,
    }


def options(prefix: str = "p", **more: str) -> WriterOptions:
    from spark_kafka_eos._internal.config.writer import parse_writer_options

    return parse_writer_options({"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "out", "transactional.id.prefix": prefix, **more},
                                streaming=True)
