"""Spark's writer interfaces for ``kafka_eos``: thin. :mod:`~spark_kafka_eos._internal.write.open_writer` opens them on the
driver (validation and recovery before any task); executors run :func:`write_task`; the driver's commit and abort
go to the :class:`TwoPhaseCommitCoordinator`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from spark_kafka_eos._internal.config.writer import WriterOptions
from spark_kafka_eos._internal.decision_log.records import EpochId
from spark_kafka_eos._internal.worker_gc import freeze_driver_call_heap, freeze_worker_heap
from spark_kafka_eos._internal.write.commit_message import TaskCommit
from spark_kafka_eos._internal.write.commit_outcomes import Ending
from spark_kafka_eos._internal.write.hooks import WriterHooks
from spark_kafka_eos._internal.write.input_schema import InputColumns
from spark_kafka_eos._internal.write.spark_checkpoint import checkpoint_of_session
from spark_kafka_eos._internal.write.task_producer import count_task_input, write_task

if TYPE_CHECKING:
    from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
SESSION_CHECKPOINT_PROPERTY = "spark.sql.streaming.checkpointLocation"
JOB_DESCRIPTION_PROPERTY = "spark.job.description"


class _KafkaEosWriterBase:
    def __init__(self, options: WriterOptions, columns: InputColumns, transaction_timeout_ms: int, hooks: WriterHooks) -> None:
        self.options = options
        self.columns = columns  # found on the driver; tasks get pickled copies
        self.transaction_timeout_ms = transaction_timeout_ms
        self.hooks = hooks

    def _write(self, epoch: EpochId, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        freeze_worker_heap(self.options.gc_freeze)
        return write_task(self.options, epoch, self.hooks.task_input(iterator), transaction_timeout_ms=self.transaction_timeout_ms,
                          columns=self.columns)

    @property
    def coordinator(self) -> TwoPhaseCommitCoordinator:
        # The driver's alone: a task's Python worker starts without importing it.
        from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator

        return TwoPhaseCommitCoordinator(self.options, self.transaction_timeout_ms, self.hooks)


class StreamWriterCore(_KafkaEosWriterBase):
    """``df.writeStream.format("kafka_eos")``: each micro-batch is one two-phase commit, identified by
    the query id (stable across restarts of one checkpoint) and the batch id. Spark's writer class
    differs by version (:mod:`~spark_kafka_eos._internal.write.arrow_stream_writer` on Spark 4.1+,
    :mod:`~spark_kafka_eos._internal.write.legacy_stream_writer` on 4.0)."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        context = TaskContext.get()
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
        batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
        if not query_id or batch_id is None:
            raise Ending.RUN_REFUSED.error(
                f"The task has no {QUERY_ID_PROPERTY} / {BATCH_ID_PROPERTY} property, so its micro-batch cannot be "
                "identified; nothing was written. kafka_eos needs Spark 4 structured streaming (micro-batch triggers)."
            )
        written = self._write(EpochId.stream(query_id, int(batch_id)), iterator)
        if context is not None and self.options.checkpoint_location is None and isinstance(written, TaskCommit):
            location = checkpoint_of_session(context.getLocalProperty(SESSION_CHECKPOINT_PROPERTY),
                                             context.getLocalProperty(JOB_DESCRIPTION_PROPERTY), query_id)
            written = replace(written, checkpoint_location=location)
        return written

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        epoch = _stream_epoch(messages, batchId)
        if epoch is not None:
            self.coordinator.commit(epoch, messages)
        freeze_driver_call_heap(self.options.gc_freeze)

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        epoch = _stream_epoch(messages, batchId)
        if epoch is not None:
            self.coordinator.abort(epoch, messages)
        # else: no task reported; what they left open is swept by the next epoch.
        freeze_driver_call_heap(self.options.gc_freeze)


class KafkaEosBatchWriter(_KafkaEosWriterBase, DataSourceArrowWriter):
    """``df.write.format("kafka_eos")``: the whole job is one two-phase commit, all or nothing,
    identified by its write id (option ``writeId``, else a new one per job)."""

    def __init__(self, options: WriterOptions, columns: InputColumns, transaction_timeout_ms: int, hooks: WriterHooks,
                 epoch: EpochId, already_committed: bool) -> None:
        super().__init__(options, columns, transaction_timeout_ms, hooks)
        self.epoch = epoch  # made on the driver; tasks and commit get pickled copies
        self.already_committed = already_committed

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.already_committed:
            return count_task_input(self.epoch, iterator, self.columns, self.options.topic)
        return self._write(self.epoch, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        if self.already_committed:
            self.coordinator.confirm_rerun(self.epoch, messages)
        else:
            self.coordinator.commit(self.epoch, messages)
        freeze_driver_call_heap(self.options.gc_freeze)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        if not self.already_committed:
            self.coordinator.abort(self.epoch, messages)
        freeze_driver_call_heap(self.options.gc_freeze)


def _stream_epoch(messages: Sequence[WriterCommitMessage | None], batch_id: int) -> EpochId | None:
    """The epoch the tasks wrote for; None when no task reported (nothing was written)."""
    epochs = {EpochId.parse(m.epoch_id) for m in messages if isinstance(m, TaskCommit)}
    if not epochs:
        return None
    epoch = epochs.pop()
    if epochs or epoch.batch_id != batch_id:
        raise Ending.STRANGER_TASKS.error(f"Tasks of {sorted(map(str, epochs | {epoch}))} were handed to the commit of micro-batch "
                                          f"{batch_id}: a bug; nothing was committed.")
    return epoch


