"""Transactional ids of a prefix: ``<prefix>-<sparkPartition>-<attempt>`` for tasks and
``<prefix>-coordinator`` for the driver's decision transaction.

Ids are reused by every batch, so their number stays bounded by partitions x attempts (Flink's
default scheme is not); ``init_transactions`` on a reused id fences any zombie of an earlier batch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

COORDINATOR_SUFFIX = "coordinator"


def task_transactional_id(prefix: str, spark_partition: int, attempt_number: int) -> str:
    return f"{prefix}-{spark_partition}-{attempt_number}"


def coordinator_transactional_id(prefix: str) -> str:
    return f"{prefix}-{COORDINATOR_SUFFIX}"


@dataclass(frozen=True)
class TaskTransactionalId:
    prefix: str
    spark_partition: int
    attempt_number: int


def parse_task_transactional_id(prefix: str, transactional_id: str) -> Optional[TaskTransactionalId]:
    """The task id parts if ``transactional_id`` is a task id of exactly ``prefix``, else None
    (so prefix ``a`` never claims the ids of prefix ``a-1``)."""
    match = re.fullmatch(re.escape(prefix) + r"-(\d+)-(\d+)", transactional_id)
    if match is None:
        return None
    return TaskTransactionalId(prefix, int(match.group(1)), int(match.group(2)))


def belongs_to_prefix(prefix: str, transactional_id: str) -> bool:
    """True for the task ids and the coordinator id of exactly ``prefix``."""
    return transactional_id == coordinator_transactional_id(prefix) or parse_task_transactional_id(prefix, transactional_id) is not None
