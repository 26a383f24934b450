"""Accumulate consumed Kafka messages into Arrow record batches of Spark's Kafka schema."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message

from spark_kafka_eos._internal.schema import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE, arrow_record_schema
from spark_kafka_eos.errors import KafkaEosReadError

_NO_TIMESTAMP = -1
MAX_TIMESTAMP_MS = (2**63 - 1) // 1000
"""The largest record timestamp (ms, either sign) that Spark's timestamp column (microseconds in a long) holds."""
_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME: LOG_APPEND_TIME}


class RecordBatchBuilder:
    """Collects the messages of one topic-partition until :meth:`full`, then :meth:`build`."""

    def __init__(self, topic: str, partition: int, include_headers: bool, max_records: int, max_bytes: int) -> None:
        self._include_headers = include_headers
        self._max_records = max_records
        self._max_bytes = max_bytes
        self._schema = arrow_record_schema(include_headers)
        self._constant = ConstantColumns(topic, partition)
        self._reset()

    def _reset(self) -> None:
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._offsets: list[int] = []
        self._timestamps: list[int | None] = []
        self._timestamp_types: list[int] = []
        self._headers: list[list[tuple[str, str | bytes | None]] | None] = []
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._offsets)

    def add(self, message: Message, offset: int) -> None:
        """Append ``message``, a fetched record at ``offset`` (its ``offset()``, which the caller has read)."""
        key, value = message.key(), message.value()
        self._keys.append(key)
        self._values.append(value)
        self._offsets.append(offset)
        ts_type, ts_ms = message.timestamp()
        # A v2 batch keeps a producer's "no timestamp" (-1) and the broker labels it CreateTime.
        spark_type = _TIMESTAMP_TYPES.get(ts_type, NO_TIMESTAMP_TYPE) if ts_ms != _NO_TIMESTAMP else NO_TIMESTAMP_TYPE
        if spark_type != NO_TIMESTAMP_TYPE and abs(ts_ms) > MAX_TIMESTAMP_MS:
            raise timestamp_out_of_range(self._constant.topic, self._constant.partition, offset, ts_ms)
        self._timestamp_types.append(spark_type)
        self._timestamps.append(ts_ms * 1000 if spark_type != NO_TIMESTAMP_TYPE else None)
        self._bytes += (len(key) if key else 0) + (len(value) if value else 0)
        if self._include_headers:
            # Like Spark's Kafka source: null, not an empty array, when a record has no headers.
            # A consumed record's headers are a list of (name, value) pairs (a dict only on produce).
            headers = message.headers() or None
            assert headers is None or isinstance(headers, list)
            self._headers.append(headers)
            self._bytes += sum(len(name.encode()) + (len(data) if data else 0) for name, data in headers or ())

    def full(self) -> bool:
        return len(self._offsets) >= self._max_records or self._bytes >= self._max_bytes

    def build(self) -> pa.RecordBatch:
        """The collected messages as one record batch; the builder is empty afterwards."""
        n = len(self._offsets)
        columns = [
            pa.array(self._keys, pa.binary()),
            pa.array(self._values, pa.binary()),
            *self._constant.for_rows(n),
            pa.array(self._offsets, pa.int64()),
            pa.array(self._timestamps, pa.timestamp("us", tz="UTC")),
            pa.array(self._timestamp_types, pa.int32()),
        ]
        if self._include_headers:
            columns.append(pa.array(self._headers, self._schema.field("headers").type))
        batch = pa.RecordBatch.from_arrays(columns, schema=self._schema)
        self._reset()
        return batch


def timestamp_out_of_range(topic: str, partition: int, offset: int, timestamp_ms: int) -> KafkaEosReadError:
    """The error of a record whose timestamp Spark's timestamp column cannot hold (Spark's own source fails on it too)."""
    return KafkaEosReadError(
        f"The record at offset {offset} of {topic}-{partition} has the timestamp {timestamp_ms} ms, beyond what Spark's "
        f"timestamp column holds (microseconds in a 64-bit integer, at most {MAX_TIMESTAMP_MS} ms either side of 1970); "
        "Spark's Kafka source fails on it too. Nothing of this read was returned. Fix: read from past that offset "
        "(startingOffsets), or have the producer set a real timestamp; brokers refuse such timestamps unless the topic's "
        "message.timestamp.after.max.ms allows them."
    )


def unparsable_headers(topic: str, partition: int, offset: int, reason: str) -> KafkaEosReadError:
    """The error of a record whose headers librdkafka cannot parse (Spark's own source fails on it too)."""
    return KafkaEosReadError(
        f"The record at offset {offset} of {topic}-{partition} has headers librdkafka cannot parse ({reason}); Spark's "
        "Kafka source fails on it too, and a null headers column would lose them silently. Nothing of this read was "
        "returned. Fix: find out what wrote it (kafka-dump-log --print-data-log on its segment); read without "
        "includeHeaders, or from past that offset (startingOffsets)."
    )


class ConstantColumns:
    """The topic and partition columns of one partition's batches: built once, at the largest size asked
    for so far, and sliced (no copy) for each batch."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self._columns: tuple[pa.Array, pa.Array] = self._build(0)

    def _build(self, rows: int) -> tuple[pa.Array, pa.Array]:
        name = self.topic.encode()
        if len(name) * rows > np.iinfo(np.int32).max:  # past a string array's 32-bit offsets: pyarrow's path raises
            return pa.repeat(pa.scalar(self.topic, pa.string()), rows), pa.repeat(pa.scalar(self.partition, pa.int32()), rows)
        # From buffers: pa.scalar and pa.array import pandas, 0.3 s of a new Python worker's start.
        offsets = np.arange(rows + 1, dtype=np.int32) * np.int32(len(name))
        topic = pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(name * rows)])
        partition = pa.Array.from_buffers(pa.int32(), rows, [None, pa.py_buffer(np.full(rows, self.partition, dtype=np.int32))])
        return topic, partition

    def for_rows(self, rows: int) -> tuple[pa.Array, pa.Array]:
        if rows > len(self._columns[0]):
            self._columns = self._build(rows)
        topic, partition = self._columns
        return topic.slice(0, rows), partition.slice(0, rows)
