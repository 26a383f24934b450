"""The product's task code (``task_producer.write_task``) over the Kafka model: executor task attempts whose producer,
transaction session and decision-log look-up are the model's, so that the operator model runs the task's own rules
(which candidate id it takes, its early producer, the straggler's abort, the source offsets and digest it reports)
rather than a re-telling of them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from types import SimpleNamespace
from unittest.mock import patch

import pyarrow as pa

import spark_kafka_eos._internal.write.task_producer as task_producer_module
from spark_kafka_eos._internal.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord
from spark_kafka_eos._internal.txn.session import PreparedTxnState
from spark_kafka_eos._internal.write.commit_message import TaskCommit
from spark_kafka_eos._internal.write.delivery_reports import DeliveryTally
from spark_kafka_eos._internal.write.input_schema import SOURCE_OFFSET, SOURCE_PARTITION, SOURCE_TOPIC, InputColumns
from spark_kafka_eos._internal.write.task_producer import TaskIdentity
from spark_kafka_eos.errors import KafkaEosWriteError
from tests.unit.kafka_model import (
    OUTPUT_PARTITIONS,
    OUTPUT_TOPIC,
    TRANSACTION_TIMEOUT_MS,
    KafkaModel,
    ModelSession,
    SerialExecutor,
    TaskFailed,
)
from tests.unit.kafka_model import (
    SOURCE_TOPIC as MODEL_SOURCE_TOPIC,
)


class ModelProducer:
    """A task's transactional producer (the ProducerClient the product's task drives) over the model: InitProducerId,
    then each row produced into the sink's topic in the id's transaction, every delivery acknowledged at once.
    ``tag`` and ``era``: what the model marks the records with (the run attempt that wrote them)."""

    def __init__(self, model: KafkaModel, config: dict[str, object], tag: int, era: int) -> None:
        self._model, self._tag, self._era = model, tag, era
        self._id = str(config["transactional.id"])
        self._timeout_ms = int(str(config.get("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)))
        self._state: PreparedTxnState | None = None
        self._tally = DeliveryTally()

    def warm_up(self, topic: str, timeout_s: float) -> None:
        pass

    def start(self, warm_up_topic: str, timeout_s: float, before_init: Callable[[], None] | None) -> None:
        if before_init is not None:
            before_init()
        self._state = PreparedTxnState(self._id, *self._model.init_producer_id(self._id, self._timeout_ms))

    def begin(self) -> None:
        pass  # the transaction begins on the coordinator with its first record (AddPartitionsToTxn)

    def produce(self, batch: pa.RecordBatch, columns: InputColumns, topic_option: str | None, transactional_id: str,
                queue_timeout_s: float) -> None:
        assert self._state is not None and topic_option == OUTPUT_TOPIC
        for partition, value in zip(batch.column("partition").to_pylist(), batch.column("value").to_pylist(), strict=True):
            record = self._model.produce(self._state, partition, value.decode(), self._tag, self._era)
            self._tally.delivered[(record.topic, record.partition)] += 1
            if self._tally.first is None:
                self._tally.set_first((record.topic, record.partition, record.offset), record.key, record.value)

    def poll(self, timeout_s: float) -> None:
        pass

    def flush(self, timeout_s: float) -> int:
        return 0

    def failed(self) -> bool:
        return False

    def deliveries(self) -> DeliveryTally:
        return self._tally

    @property
    def identity(self) -> tuple[int, int] | None:
        return None if self._state is None else (self._state.producer_id, self._state.producer_epoch)

    def abort(self, timeout_s: float) -> None:
        if self._state is not None:
            self._model.end_txn(self._state, commit=False)

    def release(self) -> None:
        pass


class _NoGuard:
    """The worker's transaction guard watches for a worker process that dies; the model's tasks run in the test's."""

    def opened(self, *_: object) -> None:
        pass

    identified = released = opened


class _ModelLogIndex:
    """The decision-log look-up a task makes (its prefix's last record, by the index): the model's."""

    def __init__(self, model: KafkaModel) -> None:
        self._model = model

    def last(self, prefix: str, scan_unindexed: bool = True) -> LogRecord | None:
        return self._model.last(prefix) if self._model.log_exists else None


@contextmanager
def _task_seams(model: KafkaModel, tag: int, era: int) -> Iterator[None]:
    with ExitStack() as stack:
        for name, seam in {
            "open_producer": lambda config, engine: ModelProducer(model, config, tag, era),
            "cached_session": lambda connection: ModelSession(model),
            "known_topic": lambda connection, topic: model.log_exists,
            "cluster_metadata": lambda connection, topic, timeout_s: SimpleNamespace(topics={}),
            "KafkaDecisionLog": lambda options: _ModelLogIndex(model),
            "worker_guard": _NoGuard,
            "_WARM_UP": SerialExecutor(),
        }.items():
            stack.enter_context(patch.object(task_producer_module, name, seam))
        yield


_OPTIONS: dict[str, WriterOptions] = {}


def _options(prefix: str) -> WriterOptions:
    if prefix not in _OPTIONS:
        _OPTIONS[prefix] = parse_writer_options({"kafka.bootstrap.servers": "127.0.0.1:9", "topic": OUTPUT_TOPIC,
                                                 "transactional.id.prefix": prefix}, streaming=True)
    return _OPTIONS[prefix]


def task_batch(epoch: EpochId, spark_partition: int, rows: int, source: tuple[int, int] | None = None,
               source_columns: bool = True, namespace: str = "") -> pa.RecordBatch:
    """The rows Spark hands a task of ``epoch``: value and partition, and the source record's position when the
    query carries it (a micro-batch's rows are the last ``rows`` records of its range)."""
    written = task_rows(epoch, spark_partition, rows, source, namespace)
    columns: dict[str, pa.Array] = {"value": pa.array([v.encode() for _, v in written], pa.binary()),
                                    "partition": pa.array([p for p, _ in written], pa.int32())}
    if source is not None and source_columns:
        columns[SOURCE_TOPIC] = pa.array([MODEL_SOURCE_TOPIC] * rows, pa.string())
        columns[SOURCE_PARTITION] = pa.array([spark_partition] * rows, pa.int32())
        columns[SOURCE_OFFSET] = pa.array([source[1] - 1 - i for i in range(rows)], pa.int64())
    return pa.record_batch(columns)


def write_task(model: KafkaModel, prefix: str, epoch: EpochId, spark_partition: int, attempt: int, rows: int,
               tag: int, era: int, source: tuple[int, int] | None = None, source_columns: bool = True,
               namespace: str = "") -> TaskCommit:
    """An executor task attempt: the product's ``write_task`` over the model. ``source``: the offsets [begin, end)
    of source partition ``spark_partition`` that a micro-batch's task reads; ``source_columns``: whether its rows carry
    them. A task that finds every id it may use holding an open transaction fails (:class:`TaskFailed`)."""
    batch = task_batch(epoch, spark_partition, rows, source, source_columns, namespace)
    with _task_seams(model, tag, era):
        try:
            return task_producer_module.write_task(
                _options(prefix), epoch, [batch], TaskIdentity(spark_partition, attempt, 100 + spark_partition),
                TRANSACTION_TIMEOUT_MS, InputColumns.of(batch.schema.names))
        except KafkaEosWriteError as err:
            raise TaskFailed(str(err)) from err


def count_task(epoch: EpochId, spark_partition: int, rows: int, namespace: str = "") -> TaskCommit:
    """A task of a batch job whose writeId is committed: the product's ``count_task_input`` over its rows."""
    batch = task_batch(epoch, spark_partition, rows, namespace=namespace)
    return task_producer_module.count_task_input(epoch, [batch], InputColumns.of(batch.schema.names), OUTPUT_TOPIC,
                                                 TaskIdentity(spark_partition, 0, 100 + spark_partition))


def task_rows(epoch: EpochId, spark_partition: int, rows: int, source: tuple[int, int] | None = None,
              namespace: str = "") -> list[tuple[int, str]]:
    """(output partition, record id) of the rows a task of ``epoch`` writes, as :func:`write_task` writes them."""
    return [((spark_partition + i) % OUTPUT_PARTITIONS, record_id(epoch, spark_partition, i, source, namespace))
            for i in range(rows)]


def record_id(epoch: EpochId, spark_partition: int, index: int, source: tuple[int, int] | None = None,
              namespace: str = "") -> str:
    """What the ``index``-th record of a partition of an epoch carries: the same in every attempt of the epoch over
    the same input. A micro-batch's records carry the source record they were made of, so that two runs that read
    the same input (a query that resumed from the group where another one stopped) are told apart from two that did
    not; its rows are the last ones of its range [begin, end) (the query filters the rest out), so that a range that
    ends elsewhere yields other records even with as many rows. ``namespace`` sets apart the data of one batch job
    version (corrected data under the same writeId) or of one query that commits no consumer group."""
    if source is not None:
        found = f"{MODEL_SOURCE_TOPIC}-{spark_partition}@{source[1] - 1 - index}"
    else:
        found = f"{epoch}/{spark_partition}/{index}"
    return f"{namespace}:{found}" if namespace else found
