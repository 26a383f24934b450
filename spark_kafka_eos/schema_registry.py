"""Values in Confluent's Schema Registry wire format, split into schema id and payload.

Confluent's Avro and JSON serializers write a magic byte 0, the schema's id as 4 big-endian bytes,
then the payload. Spark's ``from_avro`` and ``from_json`` want the payload alone (Protobuf values
also carry message indexes after the id, which are not stripped here: not supported)::

    from spark_kafka_eos.schema_registry import wire_format

    df = spark.read.format("kafka_eos")...load()
    orders = df.select(wire_format("value").alias("v")).select(
        "v.schema_id", from_avro("v.payload", order_schema_json).alias("order"))

A value that is null, shorter than the header, or without the magic byte gives nulls.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

HEADER_BYTES = 5
"""The magic byte and the 4-byte schema id."""


def _is_wire_format(value: Column) -> Column:
    return (F.length(value) >= HEADER_BYTES) & (F.substring(value, 1, 1) == F.unhex(F.lit("00")))


def schema_id(value: Column | str) -> Column:
    """The schema id (int) of a wire-format binary column; null for other values."""
    column = F.col(value) if isinstance(value, str) else value
    return F.when(_is_wire_format(column), F.conv(F.hex(F.substring(column, 2, 4)), 16, 10).cast("int"))


def payload(value: Column | str) -> Column:
    """The bytes after the 5-byte header of a wire-format binary column; null for other values."""
    column = F.col(value) if isinstance(value, str) else value
    return F.when(_is_wire_format(column), F.substring(column, F.lit(HEADER_BYTES + 1), F.length(column) - HEADER_BYTES))


def wire_format(value: Column | str) -> Column:
    """A struct of ``schema_id`` and ``payload`` (see :func:`schema_id` and :func:`payload`)."""
    return F.struct(schema_id(value).alias("schema_id"), payload(value).alias("payload"))
