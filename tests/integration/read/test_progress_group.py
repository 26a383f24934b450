"""Lag and progress: a stream's ``progressGroup`` commits each micro-batch's end offsets, and the
``lag`` command prints a group's offsets against the last stable offset and the high watermark."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_kafka_eos._internal.ops import console as cli
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import group_offsets
from tests.harness.spark import kafka_eos
from tests.harness.stream import stream, to_memory

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_a_stream_commits_its_progress_and_lag_shows_it(
    spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = kafka.create_topic(2), f"progress-{uuid.uuid4().hex[:8]}"
    kafka.produce_plain(topic, [Sent(i % 2, None, b"v%d" % i) for i in range(10)])
    query, _ = to_memory(stream(spark, kafka, subscribe=topic, progressGroup=group), tmp_path, availableNow=True)
    query.awaitTermination(120)
    assert query.exception() is None
    assert group_offsets(kafka, group, topic, 2) == {0: 5, 1: 5}

    kafka.produce_plain(topic, [Sent(0, None, b"more")] * 3)
    pending = kafka.open_transaction(topic, [Sent(1, None, b"pending")])
    try:
        code = cli.main(["lag", "--bootstrap-servers", kafka.bootstrap_servers, "--group", group, "--topic", topic])
        out = capsys.readouterr().out
    finally:
        pending.abort()
    assert code == cli.EXIT_OK
    assert f"topic {topic} partition 0: group offset 5, last stable offset 8, high watermark 8, lag 3" in out
    assert f"topic {topic} partition 1: group offset 5, last stable offset 5, high watermark 6, lag 0" in out
    assert f"group {group}: total lag 3" in out


def test_progress_group_is_refused_in_a_batch_read(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    with pytest.raises(Exception, match="progressGroup.*streaming reads"):
        kafka_eos(spark, kafka, subscribe=topic, progressGroup="g").collect()
