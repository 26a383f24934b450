"""Seams at named points of a write. They do nothing here; tests subclass them to inject faults."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from spark_kafka_eos.txn.session import TransactionSession
from spark_kafka_eos.write.log_record import LogRecord

POINTS = ("before_decision", "after_decision", "during_phase2")
"""``during_phase2`` runs after the decision, before the coordinator's phase 2."""


class WriterHooks:
    """Called by the coordinator (driver) and the task writer (executors)."""

    def at(self, point: str, session: TransactionSession, decision: LogRecord) -> None:
        """The coordinator reached ``point`` of the commit of ``decision``."""

    def task_input(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """What a task writes, as it is handed over."""
        return batches


NO_HOOKS = WriterHooks()
