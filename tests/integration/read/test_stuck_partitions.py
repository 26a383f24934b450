"""A source partition held back by an open transaction shows: Spark's progress counts the records above the last
stable offset (reportLatestOffset is the high watermark), and once the LSO has stood ``stuckPartitionWarning`` below
records, a warning names the transaction's start offset, its producer and the ``kafka-transactions.sh`` commands."""

from __future__ import annotations

import logging
import time

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.local_cluster import LocalCluster
from tests.harness.stream import positions, stream_reader
from tests.integration.read.test_reader_cluster_consumers import raise_leader_epoch
from tests.integration.read.test_reader_data_loss import fill

pytestmark = pytest.mark.kafka


def test_a_partition_held_back_by_an_open_transaction_shows_in_the_lag_and_is_warned_about(
        kafka: KafkaTestCluster, caplog: pytest.LogCaptureFixture) -> None:
    held_back_by_an_open_transaction(kafka, kafka.create_topic(1), caplog)


@pytest.mark.long  # a three-broker cluster, leaders killed: make test-all
def test_on_a_cluster_above_leader_epoch_0_a_held_back_partition_is_warned_about_with_its_producer(
        kafka_cluster: LocalCluster, caplog: pytest.LogCaptureFixture) -> None:
    """The producer is asked of the partition's leader (DescribeProducers), which is not the bootstrap broker's
    business on a cluster; the partition's leader has changed (epoch above 0), as in production."""
    topic = kafka_cluster.kafka.create_topic(1)
    raise_leader_epoch(kafka_cluster, topic, 1)
    held_back_by_an_open_transaction(kafka_cluster.kafka, topic, caplog)


def held_back_by_an_open_transaction(kafka: KafkaTestCluster, topic: str, caplog: pytest.LogCaptureFixture) -> None:
    fill(kafka, topic, 3, "before")
    txn = kafka.open_transaction(topic, [Sent(0, None, b"open-1"), Sent(0, None, b"open-2")])
    fill(kafka, topic, 2, "after")
    reader = stream_reader(kafka, subscribe=topic, stuckPartitionWarning="300ms")
    start = reader.initialOffset()

    with caplog.at_level(logging.WARNING, logger="spark_kafka_eos"):
        assert positions(reader.latestOffset(start, ReadAllAvailable())) == {topic: {"0": 3}, "@origin": {topic: {"0": 0}}}
        assert positions(reader.reportLatestOffset()) == {topic: {"0": 7}}  # the lag counts what the transaction holds back
        assert not [r for r in caplog.records if "has not moved past" in r.getMessage()]
        time.sleep(0.4)
        reader.latestOffset(start, ReadAllAvailable())
        reader.latestOffset(start, ReadAllAvailable())  # once per stuck offset
    [warning] = [r.getMessage() for r in caplog.records if "has not moved past" in r.getMessage()]
    for fragment in (f"{topic}-0 has not moved past offset 3", "records up to offset 7", "by producer ",
                     f"describe-producers --topic {topic} --partition 0",
                     f"abort --topic {topic} --partition 0 --start-offset 3", "stuckPartitionWarning"):
        assert fragment in warning, warning

    txn.commit()
    assert positions(reader.latestOffset(start, ReadAllAvailable())) == {topic: {"0": 8}, "@origin": {topic: {"0": 0}}}  # past its marker


def test_no_warning_where_the_stable_offset_stands_at_the_log_end(kafka: KafkaTestCluster, caplog: pytest.LogCaptureFixture) -> None:
    """An idle partition (nothing above its LSO) is not stuck."""
    topic = kafka.create_topic(1)
    fill(kafka, topic, 3, "idle")
    reader = stream_reader(kafka, subscribe=topic, stuckPartitionWarning="100ms")
    start = reader.initialOffset()
    with caplog.at_level(logging.WARNING, logger="spark_kafka_eos"):
        reader.latestOffset(start, ReadAllAvailable())
        time.sleep(0.2)
        reader.latestOffset(start, ReadAllAvailable())
    assert not [r for r in caplog.records if "has not moved past" in r.getMessage()]
