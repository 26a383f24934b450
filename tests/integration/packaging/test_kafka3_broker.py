"""kafka_eos against a Kafka 3.x broker (3.9.1, KRaft; its jars resolved by `make test` like the main
broker's): a read_committed batch read, an exactly-once batch write, and a stream into the exactly-once
sink through Trigger.AvailableNow with maxOffsetsPerTrigger, each counted by an independent
read_committed consumer, with nothing left open as Kafka's own tool lists it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.local_kafka import REPO_ROOT, LocalKafka
from tests.harness.pipeline import Pipeline

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

KAFKA3_VERSION = "3.9.1"  # the Makefile's KAFKA3_VERSION
KAFKA3_LIBS = REPO_ROOT / ".cache" / f"kafka-{KAFKA3_VERSION}" / "libs"


@pytest.fixture(scope="module")
def kafka3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTestCluster]:
    assert any(KAFKA3_LIBS.glob(f"kafka_2.13-{KAFKA3_VERSION}.jar")), f"no Kafka {KAFKA3_VERSION} jars in {KAFKA3_LIBS}: run `make kafka-jars`"
    with LocalKafka(tmp_path_factory.mktemp("kafka3"), libs_dir=KAFKA3_LIBS) as broker:
        yield KafkaTestCluster(broker.bootstrap_servers)


def test_reads_and_both_sinks_are_exactly_once_on_a_kafka_3_broker(spark: SparkSession, kafka3: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka3, tmp_path, partitions=2)
    sent = pipeline.produce(120)
    kafka3.open_transaction(pipeline.source, [Sent(0, b"gone", b"aborted")]).abort()

    batch = spark.read.format("kafka_eos").option("kafka.bootstrap.servers", kafka3.bootstrap_servers).option("subscribe", pipeline.source).load()
    assert sorted(bytes(r.value) for r in batch.select("value").collect()) == sorted(s.value or b"" for s in sent)

    batch_sink = kafka3.create_topic(2, "batch-sink")
    (batch.select("key", "value").write.format("kafka_eos").mode("append").option("kafka.bootstrap.servers", kafka3.bootstrap_servers)
     .option("topic", batch_sink).option("transactional.id.prefix", f"k3-{uuid.uuid4().hex[:6]}")
     .option("decisionLogTopic", pipeline.decision_log).save())
    kafka3.wait_until_stable(batch_sink)
    assert sorted(r.value or b"" for r in kafka3.read_committed(batch_sink)) == sorted(s.value or b"" for s in sent)

    df = pipeline.source_df(maxOffsetsPerTrigger=50).selectExpr("key", "value", "partition")
    query = (df.writeStream.format("kafka_eos").option("kafka.bootstrap.servers", kafka3.bootstrap_servers)
             .option("topic", pipeline.sink).option("transactional.id.prefix", pipeline.prefix)
             .option("decisionLogTopic", pipeline.decision_log).option("checkpointLocation", str(pipeline.checkpoint))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(180), "the AvailableNow run did not end"
        assert query.exception() is None
        assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [50, 50, 20]
    finally:
        query.stop()
    pipeline.assert_exactly_once(sent)
