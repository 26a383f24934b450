"""Check the schema of a DataFrame written with ``kafka_eos``, on the driver, before any task runs.

Columns are those of Spark's Kafka sink, matched by exact name:

* ``value`` (binary or string), required; null values are tombstones;
* ``key`` (binary or string), optional;
* ``topic`` (string), required unless the ``topic`` option is set, which then wins (as in Spark);
* ``partition`` (int), optional; null means "let the partitioner choose";
* ``headers`` (array<struct<key:string,value:binary>>), optional;
* ``source_topic`` (string), ``source_partition`` (int), ``source_offset`` (bigint): where each row was read
  from. Never written to Kafka; the task reports max(offset) + 1 per source partition, which the coordinator
  commits to ``consumerGroup`` inside the decision transaction. All three go together. A pipeline reading with
  ``kafka_eos`` renames the reader's topic, partition and offset columns to these. A stream with a
  ``checkpointLocation`` option needs none of them for ``consumerGroup``: the coordinator then commits the end
  offsets of the micro-batch from Spark's offset log (an aggregating query's rows carry no source offsets). A batch
  job with ``consumerGroup`` needs all three.

Any other column is ignored, as Spark's Kafka sink does, so a DataFrame can carry columns it needs elsewhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
)

from spark_kafka_eos._internal.config.writer import WriterOptions
from spark_kafka_eos.errors import KafkaEosSchemaError, KafkaEosWriteError

VALUE, KEY, TOPIC, PARTITION, HEADERS = "value", "key", "topic", "partition", "headers"
SOURCE_TOPIC, SOURCE_PARTITION, SOURCE_OFFSET = "source_topic", "source_partition", "source_offset"
SOURCE_COLUMNS = (SOURCE_TOPIC, SOURCE_PARTITION, SOURCE_OFFSET)

_BYTES = (BinaryType(), StringType())
# Column -> (accepted types, how an error message names them).
_COLUMN_TYPES: dict[str, tuple[tuple[DataType, ...], str]] = {
    VALUE: (_BYTES, "binary or string"),
    KEY: (_BYTES, "binary or string"),
    TOPIC: ((StringType(),), "string"),
    PARTITION: ((IntegerType(),), "int"),
    SOURCE_TOPIC: ((StringType(),), "string"),
    SOURCE_PARTITION: ((IntegerType(),), "int"),
    SOURCE_OFFSET: ((LongType(),), "bigint"),
}
_HEADERS_TYPE = "array<struct<key:string,value:binary>>"
ALLOWED_COLUMNS = (VALUE, KEY, TOPIC, PARTITION, HEADERS, *SOURCE_COLUMNS)


@dataclass(frozen=True)
class InputColumns:
    """Which sink columns the DataFrame has (``value`` always), and which it has that the sink ignores."""

    key: bool
    topic: bool
    partition: bool
    headers: bool
    source_position: bool
    ignored: tuple[str, ...] = ()

    @classmethod
    def of(cls, names: Sequence[str]) -> InputColumns:
        """The sink's columns among ``names`` (a Spark or an Arrow schema's field names)."""
        return cls(
            key=KEY in names,
            topic=TOPIC in names,
            partition=PARTITION in names,
            headers=HEADERS in names,
            source_position=any(name in names for name in SOURCE_COLUMNS),
            ignored=tuple(name for name in names if name not in ALLOWED_COLUMNS),
        )


def validate_input_schema(schema: StructType, options: WriterOptions, streaming: bool = False) -> InputColumns:
    """Check ``schema`` against the sink's columns and ``options`` (of a stream, if ``streaming``); raise
    :class:`KafkaEosSchemaError`."""
    names = [field.name for field in schema.fields]
    duplicated = sorted(name for name, count in Counter(names).items() if count > 1 and name in ALLOWED_COLUMNS)
    if duplicated:
        raise KafkaEosSchemaError(duplicated[0], "appears more than once.", "select or rename so that it appears once.")
    types = {field.name: field.dataType for field in schema.fields}
    if VALUE not in types:
        raise KafkaEosSchemaError(VALUE, f"is missing{_case_hint(VALUE, names)}.", "add a value column, e.g. df.selectExpr('CAST(v AS STRING) AS value').")
    if TOPIC not in types and options.topic is None:
        raise KafkaEosSchemaError(
            TOPIC, f"is missing{_case_hint(TOPIC, names)} and no 'topic' option is set.",
            "add .option('topic', 'name'), or a string column 'topic' naming each row's topic.",
        )
    for name, data_type in types.items():
        if name in _COLUMN_TYPES:
            _check_type(name, data_type)
    if HEADERS in types:
        _check_headers(types[HEADERS])
    present_sources = [name for name in SOURCE_COLUMNS if name in types]
    group_from_offset_log = streaming and options.checkpoint_location is not None and not present_sources
    if (options.consumer_group is not None and not group_from_offset_log) or present_sources:
        missing = [name for name in SOURCE_COLUMNS if name not in types]
        if missing:
            why = (f"it goes with {', '.join(present_sources)}" if present_sources
                   else f"the consumerGroup option ({options.consumer_group!r}) of a batch write (or of a stream without "
                        "a checkpointLocation option) needs it")
            raise KafkaEosSchemaError(
                missing[0], f"is missing; {why}.",
                "carry the reader's topic, partition and offset columns as source_topic, source_partition and "
                "source_offset (withColumnRenamed), or remove consumerGroup and the source_* columns (a stream with "
                ".option('checkpointLocation', ...) commits its micro-batches' end offsets without them).",
            )
    return InputColumns.of(names)


def _check_type(name: str, data_type: DataType) -> None:
    accepted, description = _COLUMN_TYPES[name]
    if data_type not in accepted:
        cast = "string" if description == "binary or string" else description
        raise KafkaEosSchemaError(
            name, f"has type {data_type.simpleString()}, but must be {description}.",
            f"cast {name} to {description.replace(' or ', '/')}, e.g. col('{name}').cast('{cast}').",
        )


def _check_headers(data_type: DataType) -> None:
    element = data_type.elementType if isinstance(data_type, ArrayType) else None
    fields = sorted((f.name, f.dataType.simpleString()) for f in element.fields) if isinstance(element, StructType) else []
    if fields != [("key", "string"), ("value", "binary")]:
        raise KafkaEosSchemaError(
            HEADERS, f"has type {data_type.simpleString()}, but must be {_HEADERS_TYPE}.",
            "build it as array(struct(lit('name').alias('key'), col('v').cast('binary').alias('value'))).",
        )


def _case_hint(name: str, names: list[str]) -> str:
    other = [n for n in names if n.lower() == name and n != name]
    return f" (found '{other[0]}': column names are matched exactly; rename it)" if other else ""


def topic_missing(column: pa.Array | None) -> bool:
    """True if there is no topic column, or a row's topic is null or empty (checked per batch: the schema
    allows both)."""
    if column is None or column.null_count:
        return True
    if len(column) == 0:
        return False
    # From the offsets, with numpy (loaded with pyarrow): pyarrow.compute costs a new Python worker 0.3 s to import.
    size = OFFSET_BYTES.get(column.type)
    if size is None:  # e.g. a view type
        column, size = column.cast(pa.large_binary()), 8
    offsets = np.frombuffer(column.buffers()[1], dtype=f"<i{size}", count=len(column) + 1, offset=column.offset * size)
    return bool((offsets[1:] == offsets[:-1]).any())


OFFSET_BYTES = {pa.string(): 4, pa.binary(): 4, pa.large_string(): 8, pa.large_binary(): 8}
"""The variable-width Arrow types the writers read from their buffers, by the size of one offset."""


def topic_column(batch: pa.RecordBatch, columns: InputColumns, transactional_id: str) -> pa.Array:
    """The batch's topic column, with a topic in every row; else the task's error (see :func:`topic_missing`)."""
    column = batch.column(TOPIC) if columns.topic else None
    if column is None or topic_missing(column):
        raise missing_topic_error(transactional_id)
    return column


def missing_topic_error(transactional_id: str) -> KafkaEosWriteError:
    """A task's error for a row without a topic (see :func:`topic_missing`)."""
    return KafkaEosWriteError(
        transactional_id, "a row has no topic (null, empty, or no topic column) and no 'topic' option is set.",
        "give every row a topic, or set .option('topic', ...)",
    )


def null_header_error(transactional_id: str) -> KafkaEosWriteError:
    """A task's error for a null header or a header with a null key."""
    return KafkaEosWriteError(
        transactional_id, "a row's headers column holds a null header, or a header whose key is null.",
        "drop them before writing, e.g. filter(headers, h -> h IS NOT NULL AND h.key IS NOT NULL)",
    )
