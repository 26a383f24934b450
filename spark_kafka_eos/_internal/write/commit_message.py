"""What an executor task hands the driver's coordinator: the committable of one task attempt."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import WriterCommitMessage

from spark_kafka_eos._internal.decision_log.records import Position
from spark_kafka_eos._internal.txn.session import PreparedTxnState

PartitionCount = tuple[str, int, int]
"""(topic, partition, records written by this task)."""

SourceOffset = tuple[str, int, int]
"""(source topic, source partition, next offset to consume = highest consumed offset + 1)."""


@dataclass(frozen=True)
class TaskCommit(WriterCommitMessage):
    """A task attempt's prepared (flushed, still open) transaction, or none if it wrote no rows.

    ``transaction`` carries the transactional id, producer id and epoch the coordinator needs to
    verify and commit the transaction without the producer, which the task dropped unclosed.
    ``epoch_id`` says which run and micro-batch the task wrote for (see ``EpochId``); ``probe`` is
    where its first record landed.
    """

    epoch_id: str
    spark_partition: int
    attempt_number: int
    task_attempt_id: int
    transaction: PreparedTxnState | None
    records: tuple[PartitionCount, ...] = ()
    source_offsets: tuple[SourceOffset, ...] = ()
    probe: Position | None = None
    source_starts: tuple[SourceOffset, ...] = ()
    """(source topic, source partition, first offset consumed)."""
    probe_digest: str | None = None
    input_rows: int = 0
    """The rows the task was handed (whether it wrote them or, in a replay, aborted them): part of the epoch's
    input identity (:class:`~spark_kafka_eos._internal.decision_log.records.EpochInput`)."""
    rows_digest: str | None = None
    """The digest of those rows (:mod:`~spark_kafka_eos._internal.write.row_digest`); None from an older worker."""
    checkpoint_location: str | None = None
    """A stream's checkpoint, where the sink has no ``checkpointLocation`` option and the task found it from the
    session's conf (:func:`~spark_kafka_eos._internal.write.spark_checkpoint.checkpoint_of_session`)."""

    @property
    def record_count(self) -> int:
        return sum(count for _, _, count in self.records)
