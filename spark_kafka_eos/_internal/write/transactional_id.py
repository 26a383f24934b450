"""Transactional ids of a prefix: ``<prefix>-<run>-<generation>-<sparkPartition>-<attempt>`` for tasks
and ``<prefix>-coordinator`` for the driver's decision transaction.

- ``run`` (8 hex digits of a digest of the run id: the streaming query id or the batch write id) keeps
  two runs on one prefix (a new checkpoint, a re-run job) from ever initialising each other's ids:
  the coordinator can then refuse a run that does not own the prefix without it having touched the
  owner's transactions.
- ``generation`` is the micro-batch's parity: a straggler of epoch N (a speculative attempt, still
  running) cannot re-initialise, and so abort, an id that epoch N+1 holds.

Ids are reused by every other epoch of a run, so their number stays bounded by 2 x partitions x
attempts per run (Flink's default scheme is not bounded); ``init_transactions`` on a reused id
fences any zombie of an earlier epoch.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from spark_kafka_eos._internal.decision_log.coordinator_id import coordinator_transactional_id
from spark_kafka_eos._internal.decision_log.records import EpochId

GENERATIONS = 2
SLOTS = 4
"""Ids a task attempt may choose from: ``attempt``, ``attempt + SLOT_STRIDE``, ... It takes the first one
that holds no open transaction, because a stage retry restarts Spark's attempt numbers (and a
straggler may still hold an id of its generation)."""
SLOT_STRIDE = 1000


def run_tag(run_id: str) -> str:
    return hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8]


def generation(epoch: EpochId) -> int:
    return (epoch.batch_id or 0) % GENERATIONS


def task_transactional_id(prefix: str, epoch: EpochId, spark_partition: int, attempt_number: int, slot: int = 0) -> str:
    return f"{prefix}-{run_tag(epoch.run_id)}-{generation(epoch)}-{spark_partition}-{attempt_number + slot * SLOT_STRIDE}"


def task_transactional_id_candidates(prefix: str, epoch: EpochId, spark_partition: int, attempt_number: int) -> list[str]:
    """The ids a task attempt may use, in order of preference."""
    return [task_transactional_id(prefix, epoch, spark_partition, attempt_number, slot) for slot in range(SLOTS)]


@dataclass(frozen=True)
class TaskTransactionalId:
    prefix: str
    run_tag: str
    generation: int
    spark_partition: int
    attempt_number: int


def parse_task_transactional_id(prefix: str, transactional_id: str) -> TaskTransactionalId | None:
    """The task id parts if ``transactional_id`` is a task id of exactly ``prefix``, else None
    (so prefix ``a`` never claims the ids of prefix ``a-1``)."""
    match = re.fullmatch(re.escape(prefix) + r"-([0-9a-f]{8})-(\d+)-(\d+)-(\d+)", transactional_id)
    if match is None:
        return None
    return TaskTransactionalId(prefix, match.group(1), int(match.group(2)), int(match.group(3)), int(match.group(4)))


def belongs_to_prefix(prefix: str, transactional_id: str) -> bool:
    """True for the task ids and the coordinator id of exactly ``prefix``."""
    return transactional_id == coordinator_transactional_id(prefix) or parse_task_transactional_id(prefix, transactional_id) is not None
