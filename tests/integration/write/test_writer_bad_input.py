"""Bad writes fail clearly and leave nothing visible and no open transaction."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.harness.kafka import KafkaTestCluster
from tests.harness.pipeline import Pipeline

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def write(df: DataFrame, pipeline: Pipeline, **options: str) -> None:
    writer = df.write.format("kafka_eos").mode("append").option("kafka.bootstrap.servers", pipeline.kafka.bootstrap_servers)
    for name, value in {"topic": pipeline.sink, "transactional.id.prefix": pipeline.prefix, "decisionLogTopic": pipeline.decision_log, **options}.items():
        writer = writer.option(name, value)
    writer.save()


def assert_nothing_left(kafka: KafkaTestCluster, pipeline: Pipeline) -> None:
    kafka.wait_until_stable(pipeline.sink)
    assert kafka.read_committed(pipeline.sink) == []
    assert pipeline.open_transactions() == []


@pytest.mark.parametrize(
    "select,options,expected",
    [
        ("CAST(id AS STRING) AS key", {}, "Column 'value': is missing"),
        ("id AS value", {}, "Column 'value'"),
        ("CAST(id AS STRING) AS value", {"topic": ""}, "topic"),
        ("CAST(id AS STRING) AS value", {"kafka.transaction.timeout.ms": "10000"}, "kafka.transaction.timeout.ms': is 10000 ms"),
        ("CAST(id AS STRING) AS value; array(named_struct('key', 'h', 'value', CAST('v' AS BINARY)), NULL) AS headers", {},
         "headers column holds a null header"),
        ("CAST(id AS STRING) AS value; array(named_struct('key', CAST(NULL AS STRING), 'value', CAST('v' AS BINARY))) AS headers", {},
         "a header whose key is null"),
    ],
)
def test_bad_columns_and_options(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path, select: str, options: dict[str, str], expected: str) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    with pytest.raises(Exception, match=expected) as info:
        write(spark.range(10).selectExpr(*select.split("; ")), pipeline, **options)
    assert "Fix:" in str(info.value)
    assert_nothing_left(kafka, pipeline)


def test_no_topic_at_all(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    writer = (
        spark.range(3).selectExpr("CAST(id AS STRING) AS value").write.format("kafka_eos").mode("append")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("transactional.id.prefix", pipeline.prefix)
    )
    with pytest.raises(Exception, match="topic") as info:
        writer.save()
    assert "Fix:" in str(info.value)


def test_a_batch_write_needs_a_prefix(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    writer = (
        spark.range(3).selectExpr("CAST(id AS STRING) AS value").write.format("kafka_eos").mode("append")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", pipeline.sink)
    )
    with pytest.raises(Exception, match="transactional.id.prefix"):
        writer.save()


def test_a_stream_without_prefix_or_checkpoint_option(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    spark.conf.set("spark.sql.streaming.checkpointLocation", str(tmp_path / "conf-checkpoints"))
    try:
        query = (
            pipeline.source_df().selectExpr("value").writeStream.format("kafka_eos")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", pipeline.sink)
            .start()
        )
        with pytest.raises(Exception, match="transactional.id.prefix"):
            query.awaitTermination(120)
            query.processAllAvailable()
    finally:
        spark.conf.unset("spark.sql.streaming.checkpointLocation")


def test_overwrite_is_refused(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    writer = (
        spark.range(3).selectExpr("CAST(id AS STRING) AS value").write.format("kafka_eos").mode("overwrite")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", pipeline.sink)
        .option("transactional.id.prefix", pipeline.prefix)
    )
    with pytest.raises(Exception, match="append"):
        writer.save()


def test_a_record_larger_than_the_broker_accepts(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    small = kafka.create_topic(3, config={"max.message.bytes": "2000"})
    df = spark.range(0, 30, numPartitions=3).selectExpr("IF(id = 17, REPEAT('x', 5000), CAST(id AS STRING)) AS value")
    with pytest.raises(Exception, match="MSG_SIZE_TOO_LARGE|too large|max.message.bytes"):
        write(df, pipeline, topic=small)
    kafka.wait_until_stable(small)
    assert kafka.read_committed(small) == []
    assert pipeline.open_transactions() == []
