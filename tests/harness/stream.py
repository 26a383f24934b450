"""Streaming test helpers: a kafka_eos stream into a memory sink, and the driver-side stream
reader on its own (planning without Spark, to test one planning step at a time)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.admission_stream_reader import KafkaEosStreamReader
from spark_kafka_eos._internal.read.reader import ORIGIN_KEY
from spark_kafka_eos._internal.read.topic_identity import TOPIC_IDS_KEY
from tests.harness.kafka import KafkaTestCluster


def stream(spark: SparkSession, kafka: KafkaTestCluster, source: str = "kafka_eos", **options: object) -> DataFrame:
    """``spark.readStream.format(source)`` from earliest unless told otherwise."""
    reader = spark.readStream.format(source).option("kafka.bootstrap.servers", kafka.bootstrap_servers)
    for name, value in {"startingOffsets": "earliest", **options}.items():
        reader = reader.option(name, str(value))
    return reader.load()


def to_memory(df: DataFrame, tmp_path: Path, name: str = "", **trigger: object) -> tuple[StreamingQuery, str]:
    """Start ``df`` into a memory sink; ``name`` (new if empty) is also its checkpoint, so a
    second call with the same name restarts the query from its checkpoint."""
    name = name or f"q_{uuid.uuid4().hex[:8]}"
    writer = df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(tmp_path / name))
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start(), name


def values(spark: SparkSession, name: str) -> list[bytes]:
    return sorted(bytes(r.value) for r in spark.sql(f"select value from {name}").collect())


def stream_reader(kafka: KafkaTestCluster, **options: str) -> KafkaEosStreamReader:
    """The driver's stream reader, from earliest unless told otherwise."""
    raw = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "startingoffsets": "earliest", **{k.lower(): v for k, v in options.items()}}
    return KafkaEosStreamReader(parse_reader_options(raw, streaming=True))


def to_parquet(df: DataFrame, tmp_path: Path, name: str, **trigger: object) -> StreamingQuery:
    """Start ``df`` into parquet files under ``tmp_path/name``; a second call with the same name
    restarts the query from its checkpoint (the memory sink cannot)."""
    writer = df.select("value").writeStream.format("parquet").option("path", str(tmp_path / name / "out"))
    writer = writer.option("checkpointLocation", str(tmp_path / name / "checkpoint"))
    return writer.trigger(**trigger).start() if trigger else writer.start()


def parquet_values(spark: SparkSession, tmp_path: Path, name: str) -> list[bytes]:
    """Every value the parquet query ``name`` committed, in all its runs."""
    files = spark.read.schema("value binary").parquet(str(tmp_path / name / "out"))
    return sorted(bytes(r.value) for r in files.collect())


def positions(offset: dict[str, Any]) -> dict[str, Any]:
    """A stream offset without the topic ids it carries (integration/read/test_reader_topic_identity.py checks those),
    in its origin too."""
    out = {key: value for key, value in offset.items() if key != TOPIC_IDS_KEY}
    if ORIGIN_KEY in out:
        out[ORIGIN_KEY] = positions(out[ORIGIN_KEY])
    return out
