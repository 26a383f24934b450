"""Seams at named points of a write. They do nothing here; tests subclass them to inject faults."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from spark_kafka_eos._internal.decision_log.records import LogRecord
from spark_kafka_eos._internal.txn.protocol import TransactionClient

BEFORE_DECISION = "before_decision"
AFTER_DECISION = "after_decision"
DURING_PHASE2 = "during_phase2"
"""After the decision, before the coordinator's phase 2."""
POINTS = (BEFORE_DECISION, AFTER_DECISION, DURING_PHASE2)
"""The coordinator's named points, in the order it reaches them."""


class WriterHooks:
    """Called by the coordinator (driver) and the task writer (executors)."""

    def at(self, point: str, session: TransactionClient, decision: LogRecord) -> None:
        """The coordinator reached ``point`` of the commit of ``decision``."""

    def task_input(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """What a task writes, as it is handed over."""
        return batches


NO_HOOKS = WriterHooks()
