"""The compiled producer of a task's transaction, from the optional ``spark-kafka-eos-native`` wheel: it
produces straight from the Arrow batch's columns and tallies delivery reports in Rust, so no Python object
is made per record.

It makes the same librdkafka calls as the confluent-kafka producer, with the same settings. With
``writeEngine=auto`` (the default), a missing wheel or a configuration it cannot run (a Python callback
such as AWS MSK IAM's token signer) makes :func:`open_native_producer` return None, and the task takes the
pure-Python path; with ``writeEngine=native`` either is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaException

from spark_kafka_eos._internal.client_errors import ClientCallError, ClientError, KafkaErrorCode, raised_as_client_call_error
from spark_kafka_eos._internal.config.librdkafka import for_librdkafka
from spark_kafka_eos._internal.native.clients import compiled_client_error, forward_logs, open_compiled
from spark_kafka_eos._internal.txn.bounded_call import bounded
from spark_kafka_eos._internal.txn.transactional_producer import WARM_UP_TIMEOUT_S
from spark_kafka_eos._internal.write.delivery_reports import DeliveryTally, EosStats, write_error
from spark_kafka_eos._internal.write.input_schema import (
    HEADERS,
    KEY,
    OFFSET_BYTES,
    PARTITION,
    VALUE,
    InputColumns,
    null_header_error,
    topic_column,
)

_Exported = tuple[object, object]
"""A column as ``__arrow_c_array__`` exports it: (schema capsule, array capsule)."""


def open_native_producer(config: Mapping[str, Any], required: bool) -> NativeProducer | None:
    """A compiled producer of ``config`` (a task's producer configuration); None where it cannot run it,
    unless ``required`` (``writeEngine=native``), which makes that an error."""
    def make(native: ModuleType, settings: list[tuple[str, str]]) -> NativeProducer:
        return NativeProducer(native.TaskProducer(settings))

    return open_compiled(for_librdkafka(config), make, "writeEngine", "write", required)


class NativeProducer:
    """A task's compiled transactional producer, with the calls of
    :class:`~spark_kafka_eos._internal.write.producers.producer_client.ProducerClient`."""

    def __init__(self, producer: Any) -> None:
        self._producer = producer
        self._stats = EosStats()
        self._warm = False

    def warm_up(self, topic: str, timeout_s: float) -> None:
        # See spark_kafka_eos._internal.txn.transactional_producer for why two metadata requests come first.
        for _ in range(2):
            if self._call(self._producer.warm_up, topic, int(min(WARM_UP_TIMEOUT_S, timeout_s) * 1000)):
                break
        self._warm = True

    def start(self, warm_up_topic: str, timeout_s: float, before_init: Callable[[], None] | None) -> None:
        if not self._warm:
            self.warm_up(warm_up_topic, timeout_s)
        if before_init is not None:
            before_init()
        self._bounded(self._producer.init_transactions, timeout_s)

    def begin(self) -> None:
        _raise_on(self._call(self._producer.begin_transaction))

    def produce(self, batch: pa.RecordBatch, columns: InputColumns, topic_option: str | None, transactional_id: str,
                queue_timeout_s: float) -> None:
        topics = None
        if topic_option is None:
            topics = _binary(topic_column(batch, columns, transactional_id))
        partitions = batch.column(PARTITION) if columns.partition else None
        if partitions is not None and partitions.type != pa.int32():
            partitions = partitions.cast(pa.int32())  # the extension reads 32-bit partition numbers
        headers = batch.column(HEADERS) if columns.headers else None
        refused = self._call(
            self._producer.produce, topic_option, topics, _binary(batch.column(VALUE)),
            _binary(batch.column(KEY)) if columns.key else None,
            None if partitions is None else partitions.__arrow_c_array__(),
            None if headers is None else _headers(headers, transactional_id), int(queue_timeout_s * 1000),
        )
        if refused is not None:
            _, code, topic, partition = refused
            self.poll(0)  # a delivery failure, if any, is the cause; report it rather than its echo
            tally = self.deliveries()
            if code == KafkaErrorCode.QUEUE_FULL:
                raise write_error(transactional_id, "the producer queue stayed full", [(topic, partition, ClientError.local(KafkaErrorCode.QUEUE_FULL), 1)])
            tally.add_failure(topic, partition, compiled_client_error(code))
            raise tally.error(transactional_id, "produce")

    def poll(self, timeout_s: float) -> None:
        self._call(self._producer.poll, int(timeout_s * 1000))

    def flush(self, timeout_s: float) -> int:
        unflushed: int = self._call(self._producer.flush, int(timeout_s * 1000))
        return unflushed

    def failed(self) -> bool:
        failed: bool = self._producer.failed()
        return failed

    def deliveries(self) -> DeliveryTally:
        tally = DeliveryTally()
        for topic, partition, count in self._producer.delivered():
            tally.delivered[topic, partition] = count
        for topic, partition, code, count in self._producer.failures():
            tally.add_failure(topic, partition, compiled_client_error(code), count)
        first = self._producer.first()
        if first is not None:
            topic, partition, offset, key, value = first
            tally.set_first((topic, partition, offset), key, value)
        return tally

    @property
    def identity(self) -> tuple[int, int] | None:
        if self._stats.identity is None:
            statistics = self._producer.take_statistics()
            if statistics is not None:
                self._stats.on_stats(statistics)
        return self._stats.identity

    def abort(self, timeout_s: float) -> None:
        self._bounded(self._producer.abort_transaction, timeout_s)

    def release(self) -> None:
        forward_logs(self._producer.close())

    def _bounded(self, transactional_call: Callable[[int], Any], timeout_s: float) -> None:
        """A transactional call given ``timeout_s``, bounded (see :mod:`~spark_kafka_eos._internal.txn.bounded_call`)."""
        with raised_as_client_call_error(KafkaException):
            _raise_on(bounded(lambda: self._call(transactional_call, int(timeout_s * 1000)), timeout_s,
                              getattr(transactional_call, "__name__", "transactional call")))

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        try:
            return method(*args)
        finally:
            forward_logs(self._producer.take_logs())


def _raise_on(error: tuple[int, str, bool, bool, bool] | None) -> None:
    if error is not None:
        code, reason, fatal, retriable, requires_abort = error
        raise ClientCallError(compiled_client_error(code, reason, fatal, retriable, requires_abort))


def _binary(array: pa.Array) -> _Exported:
    """A binary or string array, exported by Arrow's C data interface as the extension reads it (a view type
    as large binary, which it reads)."""
    if array.type not in OFFSET_BYTES:
        array = array.cast(pa.large_binary())
    return array.__arrow_c_array__()


def _headers(column: pa.Array, transactional_id: str) -> _Exported:
    entries = column.flatten()
    if entries.null_count or entries.field("key").null_count:
        raise null_header_error(transactional_id)
    return column.__arrow_c_array__()
