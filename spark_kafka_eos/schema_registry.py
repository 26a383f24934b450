"""Values in Confluent's Schema Registry wire formats, split into the schema's id and the payload.

Confluent's serializers put the schema's id in one of two places:

- a prefix of the value: a magic byte 0 and the schema id as 4 big-endian bytes, then the payload;
- a record header (Schema Registry 8.0's header-based ids): ``__value_schema_id`` (``__key_schema_id`` for keys)
  holds a magic byte 1 and the schema's 16-byte GUID, and the value is the payload alone.

Protobuf values also carry the message indexes (which message of the schema's file, as zigzag varints) after the
id, in the prefix or in the header. Spark's ``from_avro``, ``from_json`` and ``from_protobuf`` want the payload
alone::

    from spark_kafka_eos.schema_registry import wire_format

    df = spark.read.format("kafka_eos").option("includeHeaders", "true")...load()
    orders = df.select(wire_format("value", "headers").alias("v")).select(
        "v.schema_id", from_avro("v.payload", order_schema_json).alias("order"))

A header id wins over a prefix, as in Confluent's deserializers. A value that is null, shorter than its prefix,
without a magic byte, or whose message indexes do not parse gives nulls.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["GUID_HEADER_BYTES", "HEADER_BYTES", "KEY_SCHEMA_ID_HEADER", "MAX_MESSAGE_INDEX_BYTES", "VALUE_SCHEMA_ID_HEADER", "payload",
           "schema_id", "wire_format"]
HEADER_BYTES = 5
"""The magic byte and the 4-byte schema id of the prefix form."""
GUID_HEADER_BYTES = 17
"""The magic byte and the 16-byte schema GUID of the header form."""
MAX_MESSAGE_INDEX_BYTES = 64
"""How far into a Protobuf value the message indexes are looked for (a file's messages nested 30 deep still fit)."""
VALUE_SCHEMA_ID_HEADER = "__value_schema_id"
KEY_SCHEMA_ID_HEADER = "__key_schema_id"


def _column(value: Column | str) -> Column:
    return F.col(value) if isinstance(value, str) else value


def _starts_with(value: Column, magic: str, length: int) -> Column:
    return (F.length(value) >= length) & (F.substring(value, 1, 1) == F.unhex(F.lit(magic)))


def _is_wire_format(value: Column) -> Column:
    return _starts_with(value, "00", HEADER_BYTES)


def _after(value: Column, skip: int) -> Column:
    return F.substring(value, F.lit(skip + 1), F.length(value) - skip)


def schema_id(value: Column | str) -> Column:
    """The schema id (int) of a value with the 5-byte prefix; null for other values."""
    column = _column(value)
    return F.when(_is_wire_format(column), F.conv(F.hex(F.substring(column, 2, 4)), 16, 10).cast("int"))


def payload(value: Column | str) -> Column:
    """The bytes after the 5-byte prefix (Avro and JSON values); null for other values."""
    column = _column(value)
    return F.when(_is_wire_format(column), _after(column, HEADER_BYTES))


def _header_value(headers: Column, name: str) -> Column:
    """The value of the first header named ``name`` in Spark's Kafka ``headers`` column (null if none)."""
    return F.get(F.filter(headers, lambda h: h["key"] == F.lit(name)), 0)["value"]


def _guid(header: Column) -> Column:
    """The GUID of a header-form schema id as text (8-4-4-4-12 lower-case hex digits), null if malformed."""
    digits = F.lower(F.hex(F.substring(header, 2, 16)))
    text = F.concat_ws("-", *(F.substring(digits, start, length) for start, length in ((1, 8), (9, 4), (13, 4), (17, 4), (21, 12))))
    return F.when(_starts_with(header, "01", GUID_HEADER_BYTES), text)


def _shifted_left(bits: Column, shift: Column) -> Column:
    """``bits << shift`` for a varint's shift (a multiple of 7 up to 63; Spark shifts only by a constant)."""
    shifted = F.when(shift == 0, bits)
    for by in range(7, 64, 7):
        shifted = shifted.when(shift == by, F.shiftleft(bits, by))
    return shifted


_VARINT_HEX = "((?:[89A-F][0-9A-F])*[0-7][0-9A-F])"
"""One varint in upper-case hex: bytes with the high bit set, then one without."""


def _varint(token: Column) -> Column:
    """The zigzag-decoded value of one varint given as hex (up to 10 bytes)."""
    groups = F.transform(F.sequence(F.lit(0), (F.length(token) / 2 - 1).cast("int")),
                         lambda j: _shifted_left(F.conv(F.substring(token, j * 2 + 1, 2), 16, 10).cast("long").bitwiseAND(0x7F), j * 7))
    raw = F.aggregate(groups, F.lit(0).cast("long"), lambda acc, x: acc.bitwiseOR(x))
    return F.shiftright(raw, 1).bitwiseXOR(-raw.bitwiseAND(1))


def _message_indexes(data: Column) -> tuple[Column, Column]:
    """Confluent's Protobuf message indexes at the start of ``data`` and the bytes after them: a zigzag varint
    count, then that many zigzag varints; a count of 0 stands for ``[0]``. Nulls when they do not parse within
    :data:`MAX_MESSAGE_INDEX_BYTES`."""
    digits = F.hex(F.substring(data, 1, MAX_MESSAGE_INDEX_BYTES))
    tokens = F.regexp_extract_all(digits, F.lit(_VARINT_HEX), F.lit(1))
    count = _varint(F.get(tokens, 0))
    used = F.slice(tokens, 1, (F.greatest(count, F.lit(0)) + 1).cast("int"))
    prefix = F.array_join(used, "")
    # The varints must follow one another from the first byte (a match past a malformed stretch would not).
    found = (F.size(tokens) > 0) & (count >= 0) & (count < MAX_MESSAGE_INDEX_BYTES) \
        & (F.size(used) == F.greatest(count, F.lit(0)) + 1) & digits.startswith(prefix)
    indexes = F.when(count == 0, F.array(F.lit(0).cast("long"))).otherwise(F.transform(F.slice(tokens, 2, count.cast("int")), _varint))
    return F.when(found, indexes.cast("array<int>")), F.when(found, data.substr((F.length(prefix) / 2 + 1).cast("int"), F.length(data)))


def wire_format(value: Column | str, headers: Column | str | None = None, protobuf: bool = False, key: bool = False) -> Column:
    """A struct of ``schema_id`` (int, from the 5-byte prefix), ``schema_guid`` (string, from the
    ``__value_schema_id`` header, or ``__key_schema_id`` with ``key``; given ``headers``, Spark's Kafka headers
    column, read with ``includeHeaders``), ``message_indexes`` (array of int, with ``protobuf``: which message of the
    schema's file) and ``payload`` (binary, what ``from_avro``, ``from_json`` or ``from_protobuf`` decode). A header
    id wins over a prefix; the field of the other form is null. Nulls for a value in neither form."""
    column = _column(value)
    header = _header_value(_column(headers), KEY_SCHEMA_ID_HEADER if key else VALUE_SCHEMA_ID_HEADER) \
        if headers is not None else F.lit(None).cast("binary")
    in_header = header.isNotNull()
    guid = _guid(header)
    if protobuf:
        # Header form: the indexes follow the GUID in the header, and the value is the message alone.
        held = F.when(in_header, F.when(guid.isNotNull(), _after(header, GUID_HEADER_BYTES))).otherwise(
            F.when(_is_wire_format(column), _after(column, HEADER_BYTES)))
        indexes, rest = _message_indexes(held)
        body = F.when(indexes.isNotNull(), F.when(in_header, column).otherwise(rest))
    else:
        indexes = F.lit(None).cast("array<int>")
        body = F.when(in_header, F.when(guid.isNotNull(), column)).otherwise(payload(column))
    return F.struct(
        F.when(~in_header, schema_id(column)).alias("schema_id"),
        guid.alias("schema_guid"),
        indexes.alias("message_indexes"),
        body.alias("payload"),
    )
