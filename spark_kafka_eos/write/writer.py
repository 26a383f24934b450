"""Spark's writer interfaces for ``kafka_eos``: thin. Executors run :func:`write_task`; the driver's
commit and abort go to the :class:`TwoPhaseCommitCoordinator`."""

from __future__ import annotations

import os
import signal
import time
import uuid
from typing import Iterator, Optional, Sequence

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from spark_kafka_eos.write.coordinator import TASK_FAULT_POINT, KafkaEosInjectedFault, TwoPhaseCommitCoordinator
from spark_kafka_eos.write.log_record import batch_epoch, stream_epoch
from spark_kafka_eos.write.task_producer import write_task
from spark_kafka_eos.write.writer_options import WriterOptions


class _KafkaEosWriterBase:
    def __init__(self, options: WriterOptions, transaction_timeout_ms: int, fail_at: Optional[str]) -> None:
        self.options = options
        self.transaction_timeout_ms = transaction_timeout_ms
        self.fail_at = fail_at

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.fail_at is not None and self.fail_at.startswith(TASK_FAULT_POINT):
            iterator = _fail_after_first_batch(iterator, self.fail_at.partition(":")[2])
        return write_task(self.options, iterator, transaction_timeout_ms=self.transaction_timeout_ms)

    @property
    def coordinator(self) -> TwoPhaseCommitCoordinator:
        return TwoPhaseCommitCoordinator(self.options, self.transaction_timeout_ms, self.fail_at)


def _fail_after_first_batch(batches: Iterator[pa.RecordBatch], mode: str) -> Iterator[pa.RecordBatch]:
    """Test-only (``testing.failAt=task_write[:kill|:sleep<seconds>]``): the first attempt of Spark
    partition 0, after handing over its first batch, raises; or its Python worker dies (``kill``);
    or it stalls (``sleep6``: six seconds) and goes on."""
    context = TaskContext.get()
    doomed = context is not None and context.partitionId() == 0 and context.attemptNumber() == 0
    for index, batch in enumerate(batches):
        if doomed and index == 1:
            if mode.startswith("sleep"):
                time.sleep(float(mode[len("sleep"):]))
                doomed = False
                yield batch
                continue
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise KafkaEosInjectedFault("Injected fault in a task after its first batch (testing.failAt)")
        yield batch


class KafkaEosStreamWriter(_KafkaEosWriterBase, DataSourceStreamArrowWriter):
    """``df.writeStream.format("kafka_eos")``: each micro-batch is one two-phase commit."""

    def commit(self, messages: Sequence[Optional[WriterCommitMessage]], batchId: int) -> None:
        self.coordinator.commit(stream_epoch(batchId), messages)

    def abort(self, messages: Sequence[Optional[WriterCommitMessage]], batchId: int) -> None:
        self.coordinator.abort(stream_epoch(batchId), messages)


class KafkaEosBatchWriter(_KafkaEosWriterBase, DataSourceArrowWriter):
    """``df.write.format("kafka_eos")``: the whole job is one two-phase commit, all or nothing."""

    def __init__(self, options: WriterOptions, transaction_timeout_ms: int, fail_at: Optional[str]) -> None:
        super().__init__(options, transaction_timeout_ms, fail_at)
        self.write_id = uuid.uuid4().hex  # made on the driver; tasks and commit get pickled copies

    def commit(self, messages: Sequence[Optional[WriterCommitMessage]]) -> None:
        self.coordinator.commit(batch_epoch(self.write_id), messages)

    def abort(self, messages: Sequence[Optional[WriterCommitMessage]]) -> None:
        self.coordinator.abort(batch_epoch(self.write_id), messages)
