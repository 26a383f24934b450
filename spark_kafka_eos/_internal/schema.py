"""The Kafka record schema, for Spark and for Arrow, in one place.

It is the schema of Spark's built-in Kafka source, so moving from ``format("kafka")`` to
``format("kafka_eos")`` changes nothing downstream.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))

# Spark's timestampType column: org.apache.kafka.common.record.TimestampType ids.
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1


def record_schema(include_headers: bool) -> StructType:
    """The Spark schema of a Kafka read: key, value, topic, partition, offset, timestamp,
    timestampType, and headers when ``includeHeaders`` is true."""
    schema = (
        StructType()
        .add("key", BinaryType())
        .add("value", BinaryType())
        .add("topic", StringType())
        .add("partition", IntegerType())
        .add("offset", LongType())
        .add("timestamp", TimestampType())
        .add("timestampType", IntegerType())
    )
    return schema.add("headers", HEADERS_TYPE) if include_headers else schema


_ARROW_HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def arrow_record_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects from ``read()`` for :func:`record_schema` (UTC timestamps).
    Spelt out: pyspark's own converter changed its signature between 4.1 and 4.2."""
    fields = [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
    return pa.schema(fields + [("headers", _ARROW_HEADERS_TYPE)] if include_headers else fields)
