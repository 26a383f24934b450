"""The transactional id whose transactions write a prefix's decision log records: ``<prefix>-coordinator``.
Fencing it (InitProducerId) is what stops an older driver of the prefix from deciding."""

from __future__ import annotations

COORDINATOR_SUFFIX = "coordinator"
COORDINATOR_TRANSACTION_TIMEOUT_MS = 60_000
"""The decision transaction only writes a few records: a short timeout keeps a crashed driver's
half-written decision from holding the log's LSO for long."""


def coordinator_transactional_id(prefix: str) -> str:
    return f"{prefix}-{COORDINATOR_SUFFIX}"
