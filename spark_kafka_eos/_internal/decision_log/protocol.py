"""What the write path and the operator tools need of a decision log: :class:`DecisionLog`.

:class:`~spark_kafka_eos._internal.decision_log.kafka_log.KafkaDecisionLog` is the one on a Kafka topic; the tests' models of
Kafka provide their own. One instance serves one operation (a prepare, a commit, a recovery, a CLI command): it
fences the prefix's coordinator id the first time it needs to, and every write after that is in its transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from spark_kafka_eos._internal.decision_log.records import Aborting, ArchiveRef, HistoryEntry, LogRecord


class DecisionLog(Protocol):
    """A prefix's records, read and appended by one operation."""

    def ensure_topic(self) -> None:
        """Create the log's topic if it is missing; refuse one whose settings would lose records."""

    def last(self, prefix: str) -> LogRecord | None:
        """The prefix's last committed record; None if it has none."""

    def fenced_last(self, prefix: str, anew: bool = False) -> LogRecord | None:
        """Fence the prefix's coordinator id (``anew``: this log's own earlier fence too), then read its last record."""

    def append(self, record: LogRecord, group_offsets: Mapping[tuple[str, int], int] | None = None,
               before_commit: Callable[[], None] | None = None, commit_by: float | None = None) -> None:
        """Commit ``record`` (with the consumer group's offsets, when given) in the coordinator id's transaction;
        returns only once it is committed. ``before_commit`` runs before the commit; if it raises, nothing is."""

    def archive(self, prefix: str, history: tuple[HistoryEntry, ...],
                archives: tuple[ArchiveRef, ...]) -> tuple[tuple[HistoryEntry, ...], tuple[ArchiveRef, ...]]:
        """(history, archives) for a new record of ``prefix``, the oldest runs moved out once the history is too long."""

    def archived_runs(self, record: LogRecord) -> tuple[HistoryEntry, ...]:
        """The runs ``record``'s archives hold."""

    def prove_owner(self, prefix: str, aborting: Sequence[Aborting] = ()) -> None:
        """Raise unless this log's fence of the prefix's coordinator id still holds; on a prefix with no record. A
        sweep's proof names the transactions it is about to abort (``aborting``): they are then announced, in the
        coordinator id's transaction, to any driver that fences after it (:meth:`sweep_announcement`)."""

    def sweep_announcement(self, prefix: str) -> tuple[Aborting, ...]:
        """What a sweep of ``prefix`` announced it aborts while the prefix had no record, as of the last
        :meth:`last` that found none; () where it found a record (whose own ``aborting`` says it)."""

    def keep_history_mark(self, prefix: str) -> None:
        """After an operation that fenced and committed nothing, leave the coordinator id committed again."""

    def keep_for_reuse(self) -> None:
        """Keep this log's coordinator producer for the prefix's next operation in this process."""

    def records_since(self, since: int = 0) -> tuple[list[LogRecord], int]:
        """Every committed record of every prefix from log offset ``since``, and the offset to go on from."""
