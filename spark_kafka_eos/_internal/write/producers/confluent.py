"""A task's transactional producer on the pure-Python write path: confluent-kafka's ``Producer``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import repeat
from typing import Any, cast

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from spark_kafka_eos._internal.client_errors import ClientError, KafkaErrorCode, raised_as_client_call_error
from spark_kafka_eos._internal.txn.bounded_call import bounded
from spark_kafka_eos._internal.txn.transactional_producer import warmed_up_producer
from spark_kafka_eos._internal.write.delivery_reports import DeliveryTally, EosStats, write_error
from spark_kafka_eos._internal.write.input_schema import (
    HEADERS,
    KEY,
    PARTITION,
    VALUE,
    InputColumns,
    null_header_error,
    topic_column,
)
from spark_kafka_eos.errors import KafkaEosWriteError


class ConfluentProducer:
    """confluent-kafka's producer (the pure-Python path): rows become Python objects, one produce() each.

    Its callbacks are plain objects that never refer back to the producer, so dropping ``_producer`` frees
    it at once (reference counting, no cycle) and with it the librdkafka instance -- without aborting.
    """

    def __init__(self, config: Mapping[str, object]) -> None:
        self._config = config
        self._tally = DeliveryTally()
        self._stats = EosStats()
        self._producer: Producer | None = None

    def warm_up(self, topic: str, timeout_s: float) -> None:
        config = {**self._config, "on_delivery": _DeliveryReports(self._tally).on_delivery, "stats_cb": self._stats.on_stats}
        with raised_as_client_call_error(KafkaException):
            self._producer = warmed_up_producer(config, topic, timeout_s)

    def start(self, warm_up_topic: str, timeout_s: float, before_init: Callable[[], None] | None) -> None:
        if self._producer is None:
            self.warm_up(warm_up_topic, timeout_s)
        if before_init is not None:
            before_init()
        producer = self._live()
        with raised_as_client_call_error(KafkaException):
            bounded(lambda: producer.init_transactions(timeout_s), timeout_s, "init_transactions")

    def begin(self) -> None:
        with raised_as_client_call_error(KafkaException):
            self._live().begin_transaction()

    def produce(self, batch: pa.RecordBatch, columns: InputColumns, topic_option: str | None, transactional_id: str,
                queue_timeout_s: float) -> None:
        producer = self._live()
        produce = producer.produce
        for record in _records(batch, columns, topic_option, transactional_id):
            try:
                # Positional: keywords cost ~40% of the rate. Order: topic, value, key, partition,
                # callback, on_delivery (None: the configured one), timestamp (0: now), headers.
                produce(record[0], record[1], record[2], record[3], None, None, 0, record[4])
            except BufferError:
                self._produce_when_room(record, transactional_id, queue_timeout_s)
            except KafkaException as exc:
                raise self._refused(record, exc, transactional_id) from None

    def _produce_when_room(self, record: tuple[str, Any, Any, int, Any], transactional_id: str, timeout_s: float) -> None:
        producer = self._live()
        deadline = time.monotonic() + timeout_s
        while True:
            producer.poll(0.05)
            try:
                producer.produce(record[0], record[1], record[2], record[3], None, None, 0, record[4])
                return
            except BufferError:
                if time.monotonic() > deadline:
                    raise write_error(transactional_id, "the producer queue stayed full",
                                      [(record[0], record[3], ClientError.local(KafkaErrorCode.QUEUE_FULL), 1)]) from None
            except KafkaException as exc:
                raise self._refused(record, exc, transactional_id) from None

    def _refused(self, record: tuple[str, Any, Any, int, Any], exc: KafkaException, transactional_id: str) -> KafkaEosWriteError:
        """The task's error for a record librdkafka refused to produce."""
        self._live().poll(0)  # a delivery failure, if any, is the cause; report it rather than its echo
        self._tally.add_failure(record[0], record[3], ClientError.of(exc.args[0]))
        return self._tally.error(transactional_id, "produce")

    def poll(self, timeout_s: float) -> None:
        self._live().poll(timeout_s)

    def flush(self, timeout_s: float) -> int:
        return self._live().flush(timeout_s)

    def failed(self) -> bool:
        return bool(self._tally.failures)

    def deliveries(self) -> DeliveryTally:
        return self._tally

    @property
    def identity(self) -> tuple[int, int] | None:
        return self._stats.identity

    def abort(self, timeout_s: float) -> None:
        producer = self._live()
        with raised_as_client_call_error(KafkaException):
            bounded(lambda: producer.abort_transaction(timeout_s), timeout_s, "abort_transaction")

    def release(self) -> None:
        self._producer = None  # the only reference: librdkafka is destroyed here

    def _live(self) -> Producer:
        if self._producer is None:
            raise RuntimeError("the producer is not started or already released")
        return self._producer


class _DeliveryReports:
    """confluent-kafka's delivery callback into a task's tally. It never refers back to the producer (no cycle)."""

    def __init__(self, tally: DeliveryTally) -> None:
        self._tally = tally
        self._delivered = tally.delivered

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        """Called once per record (a third of a task's CPU time at 100-byte records on the pure-Python path: keep
        it lean)."""
        if err is None:
            self._delivered[msg.topic(), msg.partition()] += 1
            if self._tally.first is None:
                topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                assert topic is not None and partition is not None and offset is not None
                self._tally.set_first((topic, partition, offset), msg.key(), msg.value())
        else:
            self._tally.add_failure(msg.topic(), msg.partition(), ClientError.of(err))


def _records(batch: pa.RecordBatch, columns: InputColumns, topic_option: str | None,
             transactional_id: str) -> Iterator[tuple[str, Any, Any, int, Any]]:
    """(topic, value, key, partition, headers) per row, converted column by column (no per-row dicts).

    String columns stay ``str``: confluent-kafka encodes them as UTF-8, like Spark's Kafka sink.
    """
    rows = batch.num_rows
    values = batch.column(VALUE).to_pylist()
    keys = batch.column(KEY).to_pylist() if columns.key else repeat(None, rows)
    partitions = batch.column(PARTITION).fill_null(-1).to_pylist() if columns.partition else repeat(-1, rows)
    headers = _headers(batch.column(HEADERS), transactional_id) if columns.headers else repeat(None, rows)
    return zip(_topics(batch, columns, topic_option, transactional_id), values, keys, partitions, headers)


def _topics(batch: pa.RecordBatch, columns: InputColumns, topic_option: str | None, transactional_id: str) -> Iterable[str]:
    if topic_option is not None:  # the topic option wins over a topic column, as in Spark
        return repeat(topic_option, batch.num_rows)
    return cast(list[str], topic_column(batch, columns, transactional_id).to_pylist())  # no None: checked


def _headers(column: pa.Array, transactional_id: str) -> list[list[tuple[str, bytes | None]] | None]:
    rows = column.to_pylist()
    if any(h is None or h["key"] is None for row in rows if row for h in row):
        raise null_header_error(transactional_id)
    return [[(h["key"], h["value"]) for h in row] if row else None for row in rows]
