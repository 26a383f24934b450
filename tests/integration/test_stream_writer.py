"""df.writeStream.format("kafka_eos"): exactly-once micro-batches on a real broker."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.harness.kafka import KafkaTestCluster
from tests.harness.pipeline import Pipeline

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_many_batches_exactly_once_in_order(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    sent = pipeline.produce(300)
    query = pipeline.start(maxOffsetsPerTrigger=60)
    try:
        query.processAllAvailable()
        sent += pipeline.produce(200, start=300)
        query.processAllAvailable()
        batches = [p for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    assert len(batches) >= 9
    pipeline.assert_exactly_once(sent)
