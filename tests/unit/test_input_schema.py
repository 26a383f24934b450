"""Validation of the DataFrame schema a sink writes: pure logic, no broker."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark_kafka_eos._internal.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos._internal.schema import HEADERS_TYPE
from spark_kafka_eos._internal.write.input_schema import InputColumns, topic_missing, validate_input_schema
from spark_kafka_eos.errors import KafkaEosSchemaError

SOURCE = [("source_topic", StringType()), ("source_partition", IntegerType()), ("source_offset", LongType())]


def options(topic: str | None = "out", consumer_group: str | None = None) -> WriterOptions:
    raw = {"kafka.bootstrap.servers": "127.0.0.1:9092", "transactional.id.prefix": "p"}
    if topic:
        raw["topic"] = topic
    if consumer_group:
        raw["consumergroup"] = consumer_group
    return parse_writer_options(raw, streaming=False)


def schema(*columns: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, data_type) for name, data_type in columns])


def check(*columns: tuple[str, DataType], topic: str | None = "out", consumer_group: str | None = None) -> InputColumns:
    return validate_input_schema(schema(*columns), options(topic, consumer_group))


def error_of(*columns: tuple[str, DataType], topic: str | None = "out", consumer_group: str | None = None) -> KafkaEosSchemaError:
    with pytest.raises(KafkaEosSchemaError) as info:
        check(*columns, topic=topic, consumer_group=consumer_group)
    assert "Fix:" in str(info.value)
    return info.value


@pytest.mark.parametrize("value_type", [BinaryType(), StringType()])
def test_value_alone_with_a_topic_option(value_type: DataType) -> None:
    assert check(("value", value_type)) == InputColumns(False, False, False, False, False)


def test_every_sink_column_is_recognised_and_others_ignored() -> None:
    columns = check(
        ("key", StringType()), ("value", BinaryType()), ("topic", StringType()), ("partition", IntegerType()),
        ("headers", HEADERS_TYPE), *SOURCE, ("extra", LongType()), topic=None, consumer_group="g",
    )
    assert columns == InputColumns(True, True, True, True, True, ignored=("extra",))


def test_missing_value() -> None:
    err = error_of(("key", BinaryType()))
    assert err.column == "value" and "missing" in str(err)


def test_differently_cased_value_column_is_named() -> None:
    assert "found 'Value'" in str(error_of(("Value", BinaryType())))


@pytest.mark.parametrize(
    "column,data_type,fix",
    [
        ("value", IntegerType(), "cast value to binary/string"),
        ("value", ArrayType(BinaryType()), "cast value to binary/string"),
        ("key", LongType(), "cast key to binary/string"),
        ("topic", BinaryType(), "cast topic to string"),
        ("partition", LongType(), "cast partition to int"),
        ("source_offset", IntegerType(), "cast source_offset to bigint"),
    ],
)
def test_wrong_types_name_the_column_and_the_cast(column: str, data_type: DataType, fix: str) -> None:
    columns = {"value": BinaryType(), **dict(SOURCE), column: data_type}
    err = error_of(*columns.items())
    assert err.column == column and fix in str(err) and data_type.simpleString() in str(err)


def test_no_topic_column_and_no_topic_option() -> None:
    err = error_of(("value", BinaryType()), topic=None)
    assert err.column == "topic" and "'topic' option" in str(err)


def test_topic_column_without_topic_option() -> None:
    assert check(("value", BinaryType()), ("topic", StringType()), topic=None).topic


@pytest.mark.parametrize(
    "headers_type",
    [
        ArrayType(StructType([StructField("key", StringType()), StructField("value", StringType())])),
        ArrayType(StructType([StructField("k", StringType()), StructField("v", BinaryType())])),
        ArrayType(BinaryType()),
        StructType([StructField("key", StringType()), StructField("value", BinaryType())]),
        StringType(),
    ],
)
def test_bad_headers_type(headers_type: DataType) -> None:
    err = error_of(("value", BinaryType()), ("headers", headers_type))
    assert err.column == "headers" and "array<struct<key:string,value:binary>>" in str(err)


def test_headers_struct_field_order_does_not_matter() -> None:
    reordered = ArrayType(StructType([StructField("value", BinaryType()), StructField("key", StringType())]))
    assert check(("value", BinaryType()), ("headers", reordered)).headers


def test_consumer_group_without_source_columns() -> None:
    err = error_of(("value", BinaryType()), consumer_group="orders-group")
    assert err.column == "source_topic" and "consumerGroup" in str(err) and "withColumnRenamed" in str(err)


def test_a_stream_with_a_checkpoint_commits_its_group_without_source_columns() -> None:
    """Its group offsets come from Spark's offset log (an aggregating query's rows carry no source offsets); a stream
    without a checkpointLocation option, or with some source columns, still needs all three."""
    raw = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out", "consumergroup": "g", "checkpointlocation": "/c"}
    stream = parse_writer_options(raw, streaming=True)
    assert not validate_input_schema(schema(("value", BinaryType())), stream, streaming=True).source_position
    assert validate_input_schema(schema(("value", BinaryType()), *SOURCE), stream, streaming=True).source_position
    with pytest.raises(KafkaEosSchemaError, match="source_offset"):
        validate_input_schema(schema(("value", BinaryType()), *SOURCE[:2]), stream, streaming=True)
    without_checkpoint = parse_writer_options({**raw, "checkpointlocation": "", "transactional.id.prefix": "p"}, streaming=True)
    with pytest.raises(KafkaEosSchemaError, match="source_topic.*checkpointLocation"):
        validate_input_schema(schema(("value", BinaryType())), without_checkpoint, streaming=True)


def test_consumer_group_with_some_source_columns_names_the_missing_one() -> None:
    err = error_of(("value", BinaryType()), *SOURCE[:2], consumer_group="orders-group")
    assert err.column == "source_offset"


def test_partial_source_columns_without_consumer_group_are_refused() -> None:
    assert error_of(("value", BinaryType()), SOURCE[2]).column == "source_topic"


def test_source_columns_without_consumer_group_are_accepted() -> None:
    assert check(("value", BinaryType()), *SOURCE).source_position


def test_duplicate_sink_column_is_refused() -> None:
    assert error_of(("value", BinaryType()), ("value", StringType())).column == "value"


@pytest.mark.parametrize("kind", [pa.string(), pa.binary(), pa.large_string(), pa.large_binary(), pa.string_view()])
def test_a_null_or_empty_topic_is_missing(kind: pa.DataType) -> None:
    def column(*topics: str | None) -> pa.Array:
        return pa.array(topics, kind)

    assert topic_missing(None)
    assert not topic_missing(column("a", "orders"))
    assert not topic_missing(column())
    assert topic_missing(column("a", None))
    assert topic_missing(column("a", ""))
    assert topic_missing(column("", "a"))
    assert not topic_missing(column("", "a", "b").slice(1))  # the slice's own rows only
    assert topic_missing(column("a", "b", "").slice(1))
