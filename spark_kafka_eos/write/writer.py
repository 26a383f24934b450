"""Spark's writer interfaces for ``kafka_eos``: thin. :func:`open_stream_writer` and
:func:`open_batch_writer` validate and recover on the driver before any task; executors run :func:`write_task`; the driver's commit and abort go to the
:class:`TwoPhaseCommitCoordinator`."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from spark_kafka_eos.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos.errors import KafkaEosEpochAbortedError, KafkaEosRunRefusedError
from spark_kafka_eos.spark_support import has_arrow_stream_writers
from spark_kafka_eos.worker_gc import freeze_worker_heap
from spark_kafka_eos.write.broker_support import require_transaction_admin_apis
from spark_kafka_eos.write.commit_message import TaskCommit
from spark_kafka_eos.write.consumer_group import check_group_has_no_members
from spark_kafka_eos.write.coordinator import TwoPhaseCommitCoordinator
from spark_kafka_eos.write.hooks import NO_HOOKS, WriterHooks
from spark_kafka_eos.write.input_schema import InputColumns, validate_input_schema
from spark_kafka_eos.write.log_record import EpochId
from spark_kafka_eos.write.ownership import Verdict
from spark_kafka_eos.write.task_producer import TaskIdentity, write_task
from spark_kafka_eos.write.transaction_timeout import resolve_transaction_timeout_ms

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


def open_stream_writer(raw_options: Mapping[str, str], schema: StructType, hooks: WriterHooks = NO_HOOKS) -> DataSourceStreamWriter:
    """Validate on the driver, then fence other drivers of the prefix and roll its last decision
    forward, before any task of the query runs."""
    options, columns, timeout_ms, coordinator = _validated(raw_options, schema, True, hooks)
    coordinator.prepare()
    if has_arrow_stream_writers():
        from spark_kafka_eos.write.arrow_stream_writer import KafkaEosStreamWriter

        return KafkaEosStreamWriter(options, columns, timeout_ms, hooks)
    from spark_kafka_eos.write.legacy_stream_writer import KafkaEosLegacyStreamWriter

    return KafkaEosLegacyStreamWriter(options, columns, timeout_ms, hooks)


def open_batch_writer(raw_options: Mapping[str, str], schema: StructType, hooks: WriterHooks = NO_HOOKS) -> KafkaEosBatchWriter:
    """As :func:`open_stream_writer`, and the job is judged here too: refused up front if the prefix is
    owned by a stream, and a no-op if its ``writeId`` is already committed."""
    options, columns, timeout_ms, coordinator = _validated(raw_options, schema, False, hooks)
    epoch = EpochId.batch(options.write_id or uuid.uuid4().hex)
    already_committed = coordinator.prepare(epoch).verdict == Verdict.REPLAY
    if already_committed:
        log.warning("writeId %s of prefix %s is already committed: this run writes nothing", epoch.run_id, options.prefix)
    return KafkaEosBatchWriter(options, columns, timeout_ms, hooks, epoch, already_committed)


def _validated(raw_options: Mapping[str, str], schema: StructType, streaming: bool,
               hooks: WriterHooks) -> tuple[WriterOptions, InputColumns, int, TwoPhaseCommitCoordinator]:
    options = parse_writer_options(raw_options, streaming=streaming)
    columns = validate_input_schema(schema, options)
    timeout_ms = resolve_transaction_timeout_ms(options)
    require_transaction_admin_apis(options.connection, options.bootstrap_servers)
    check_group_has_no_members(options)
    return options, columns, timeout_ms, TwoPhaseCommitCoordinator(options, timeout_ms, hooks)


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
        return TwoPhaseCommitCoordinator(self.options, self.transaction_timeout_ms, self.hooks)


class StreamWriterCore(_KafkaEosWriterBase):
    """``df.writeStream.format("kafka_eos")``: each micro-batch is one two-phase commit, identified by
    the query id (stable across restarts of one checkpoint) and the batch id. Spark's writer class
    differs by version (:mod:`~spark_kafka_eos.write.arrow_stream_writer` on Spark 4.1+,
    :mod:`~spark_kafka_eos.write.legacy_stream_writer` on 4.0)."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        context = TaskContext.get()
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
        batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
        if not query_id or batch_id is None:
            raise KafkaEosRunRefusedError(
                f"The task has no {QUERY_ID_PROPERTY} / {BATCH_ID_PROPERTY} property, so its micro-batch cannot be "
                "identified; nothing was written. kafka_eos needs Spark 4 structured streaming (micro-batch triggers)."
            )
        return self._write(EpochId.stream(query_id, int(batch_id)), iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        epoch = _stream_epoch(messages, batchId)
        if epoch is not None:
            self.coordinator.commit(epoch, messages, finish_later=True)

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        epoch = _stream_epoch(messages, batchId)
        if epoch is not None:
            self.coordinator.abort(epoch, messages)
        # else: no task reported; what they left open is swept by the next epoch.


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
            identity = TaskIdentity.current()
            return TaskCommit(str(self.epoch), identity.spark_partition, identity.attempt_number, identity.task_attempt_id, None)
        return self._write(self.epoch, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        if not self.already_committed:
            self.coordinator.commit(self.epoch, messages)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        if not self.already_committed:
            self.coordinator.abort(self.epoch, messages)


def _stream_epoch(messages: Sequence[WriterCommitMessage | None], batch_id: int) -> EpochId | None:
    """The epoch the tasks wrote for; None when no task reported (nothing was written)."""
    epochs = {EpochId.parse(m.epoch_id) for m in messages if isinstance(m, TaskCommit)}
    if not epochs:
        return None
    epoch = epochs.pop()
    if epochs or epoch.batch_id != batch_id:
        raise KafkaEosEpochAbortedError(f"Tasks of {sorted(map(str, epochs | {epoch}))} were handed to the commit of micro-batch "
                                  f"{batch_id}: a bug; nothing was committed.")
    return epoch


