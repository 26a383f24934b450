"""Spark-side test helpers: read with kafka_eos and compare with the independent consumer."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession

from spark_kafka_eos._internal.schema import record_schema
from tests.harness.kafka import KafkaRecord, KafkaTestCluster

COMPARED = ["key", "value", "topic", "partition", "offset"]


def kafka_eos(spark: SparkSession, kafka: KafkaTestCluster, **options: object) -> DataFrame:
    """``spark.read.format("kafka_eos")`` with ``options`` (dots written as __ in names)."""
    return batch_read(spark, kafka, "kafka_eos", **options)


def batch_read(spark: SparkSession, kafka: KafkaTestCluster, source: str, **options: object) -> DataFrame:
    """``spark.read.format(source)`` with ``options`` (dots written as __ in names)."""
    reader = spark.read.format(source).option("kafka.bootstrap.servers", kafka.bootstrap_servers)
    for name, value in options.items():
        reader = reader.option(name.replace("__", "."), str(value))
    return reader.load()


def records_df(spark: SparkSession, records: Sequence[KafkaRecord], include_headers: bool = False) -> DataFrame:
    """The independent consumer's records as a DataFrame of the kafka_eos schema."""
    rows = [
        (
            r.key, r.value, r.topic, r.partition, r.offset,
            dt.datetime.fromtimestamp(r.timestamp_ms / 1000, tz=dt.timezone.utc) if r.timestamp_ms is not None else None,
            0,
        )
        + (([{"key": k, "value": v} for k, v in r.headers] if r.headers else None,) if include_headers else ())
        for r in records
    ]
    return spark.createDataFrame(rows, record_schema(include_headers))


def assert_same_records(actual: DataFrame, expected: Sequence[KafkaRecord], columns: Sequence[str] = COMPARED) -> None:
    """``actual`` holds exactly the ``expected`` records (any order), compared on ``columns``."""
    include_headers = "headers" in columns
    expected_df = records_df(actual.sparkSession, expected, include_headers).select(*columns)
    assert_df_equality(actual.select(*columns), expected_df, ignore_row_order=True, ignore_nullable=True)
