"""README promises of the writer, checked on the real broker against Kafka's own tools and clients."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.harness.kafka import KafkaTestCluster, KafkaRecord
from tests.harness.kafka_tools import console_produce
from tests.harness.pipeline import Pipeline

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def partition_by_key(records: list[KafkaRecord]) -> dict[bytes, int]:
    """Each record's key mapped to the partition it landed in."""
    return {record.key: record.partition for record in records if record.key is not None}


def test_keys_land_where_the_java_client_puts_them(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """murmur2 placement: kafka_eos puts each key in the partition Kafka's console producer picks."""
    keys = [f"key-{i}" for i in range(500)]
    by_java = kafka.create_topic(7, prefix="java")
    console_produce(kafka.bootstrap_servers, by_java, ((key, "v") for key in keys))
    pipeline = Pipeline.create(spark, kafka, tmp_path, partitions=7)
    df = spark.createDataFrame([(key, "v") for key in keys], "key STRING, value STRING")
    (
        df.write.format("kafka_eos").mode("append")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("topic", pipeline.sink)
        .option("transactional.id.prefix", pipeline.prefix)
        .option("decisionLogTopic", pipeline.decision_log)
        .save()
    )
    kafka.wait_until_stable(pipeline.sink)
    java = partition_by_key(kafka.read_committed(by_java))
    ours = partition_by_key(kafka.read_committed(pipeline.sink))
    assert len(java) == len(keys) and len(set(java.values())) == 7
    assert ours == java
