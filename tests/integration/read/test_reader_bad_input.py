"""Bad input fails on the driver, before any Spark job runs, with the option and the fix named."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable

import pytest
from pyspark.sql import DataFrame, SparkSession

from spark_kafka_eos import KafkaEosDataSource
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.spark import batch_read, kafka_eos

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def fails_before_any_job(spark: SparkSession, action: Callable[[], object]) -> str:
    """Run ``action``; it must raise before Spark started a job. Returns the error text."""
    group = f"bad-input-{uuid.uuid4().hex[:8]}"
    spark.sparkContext.setJobGroup(group, "expected to fail in planning")
    try:
        with pytest.raises(Exception) as info:
            action()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(group) == []
    return str(info.value)


@pytest.fixture(scope="module")
def topic(kafka: KafkaTestCluster) -> str:
    name = kafka.create_topic(2)
    kafka.produce_plain(name, [Sent(0, None, b"x")])
    return name


def read_with(spark: SparkSession, **options: str) -> DataFrame:
    reader = spark.read.format("kafka_eos")
    for name, value in options.items():
        reader = reader.option(name.replace("__", "."), value)
    return reader.load()


@pytest.mark.parametrize(
    "options,expected",
    [
        ({}, "Option 'kafka.bootstrap.servers': is missing"),
        ({"subscribePattern": "x.*"}, "subscribe and subscribePattern are all set"),
        ({"startingOffsets": '{"t": {"0": 1'}, "Option 'startingOffsets': is not valid JSON"),
        ({"kafka__sasl__jaas__config": "org.apache...PlainLoginModule required;"}, "kafka.sasl.username"),
        ({"kafka__enable__auto__commit": "true"}, "Option 'kafka.enable.auto.commit'"),
        ({"kafka__auto__offset__reset": "earliest"}, "use startingOffsets"),
        ({"kafka__value__deserializer": "org.apache.kafka...ByteArrayDeserializer"}, "always returns value as binary"),
        ({"startingOffset": "earliest"}, "did you mean 'startingOffsets'"),
        ({"kafka__no__such__setting": "1"}, "librdkafka rejected the consumer configuration"),
    ],
)
def test_bad_options(spark: SparkSession, kafka: KafkaTestCluster, topic: str, options: dict[str, str], expected: str) -> None:
    base = {"subscribe": topic}
    if options:
        base["kafka__bootstrap__servers"] = kafka.bootstrap_servers
    message = fails_before_any_job(spark, lambda: read_with(spark, **base, **options).collect())
    assert expected in message
    assert "Fix:" in message


def test_assigning_a_partition_that_does_not_exist(spark: SparkSession, kafka: KafkaTestCluster, topic: str) -> None:
    message = fails_before_any_job(spark, lambda: kafka_eos(spark, kafka, assign=f'{{"{topic}":[0,5]}}').collect())
    assert f"{topic}-5 (topic {topic} has partitions 0..1)" in message


def test_subscribing_to_a_missing_topic_in_a_batch_read(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    message = fails_before_any_job(spark, lambda: kafka_eos(spark, kafka, subscribe="no-such-topic-here").collect())
    assert "no-such-topic-here" in message and "do not exist" in message


def test_an_unreachable_broker_names_the_address(spark: SparkSession) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connections are refused
        message = fails_before_any_job(
            spark,
            lambda: read_with(
                spark, kafka__bootstrap__servers=f"127.0.0.1:{port}", subscribe="t", kafka__socket__timeout__ms="3000"
            ).collect(),
        )
    assert f"127.0.0.1:{port}" in message and "did not answer" in message


def test_secrets_stay_out_of_errors(spark: SparkSession, kafka: KafkaTestCluster, topic: str) -> None:
    message = fails_before_any_job(
        spark,
        lambda: kafka_eos(
            spark, kafka, subscribe=topic, kafka__security__protocol="SASL_PLAINTEXT", kafka__sasl__mechanism="PLAIN",
            kafka__sasl__username="bob", kafka__sasl__password="s3cr3t-pw", startingOffset="x",
        ).collect(),
    )
    assert "s3cr3t-pw" not in message


class ExplicitlyRegisteredDataSource(KafkaEosDataSource):
    """kafka_eos under a name no auto-registration serves: only ``spark.dataSource.register`` can."""

    @classmethod
    def name(cls) -> str:
        return "kafka_eos_explicit"


def test_explicit_registration_works_too(spark: SparkSession, kafka: KafkaTestCluster, topic: str) -> None:
    # Every other test relies on auto-registration through the pyspark_kafka_eos shim, which serves
    # "kafka_eos" whether or not register() works: hence a name of its own here.
    with pytest.raises(Exception, match="kafka_eos_explicit"):
        batch_read(spark, kafka, "kafka_eos_explicit", subscribe=topic).count()
    spark.dataSource.register(ExplicitlyRegisteredDataSource)
    assert batch_read(spark, kafka, "kafka_eos_explicit", subscribe=topic).count() == 1
