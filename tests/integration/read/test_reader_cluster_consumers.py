"""The range reader's kept consumers on a real three-broker cluster whose leader epochs are above 0, on both read
engines: a topic deleted and re-created with the same name starts again at leader epoch 0, below what a consumer
kept from before remembers of it; librdkafka ignores the new topic's metadata as stale and its fetches answer
UNKNOWN_LEADER_EPOCH. The read must not hang on such a consumer (issue 49 item 1)."""

from __future__ import annotations

import logging
import time

import pyarrow as pa
import pytest

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.idle_consumers import IDLE_CONSUMERS
from spark_kafka_eos._internal.read.partition_reader import read_offset_ranges
from spark_kafka_eos._internal.read.planner import OffsetRange
from tests.harness.kafka import Sent
from tests.harness.local_cluster import LocalCluster

pytestmark = [pytest.mark.kafka, pytest.mark.long]  # a three-broker cluster restarted: make test-all

ENGINES = ["native", "python"]
POLL_TIMEOUT_MS = 40_000


def values(batches: list[pa.RecordBatch]) -> list[bytes]:
    return [v for b in batches for v in b.column("value").to_pylist()]


def raise_leader_epoch(cluster: LocalCluster, topic: str, partitions: int) -> None:
    """Kill the leader of each of ``topic``'s partitions and restart it once another broker leads: each leader
    change raises the partition's leader epoch above 0. Proves it: every partition's leader changed."""
    for partition in range(partitions):
        leader = cluster.leader_of(topic, partition)
        cluster.kill(leader)
        new_leader = cluster.wait_for_leader(topic, partition, other_than=leader)
        cluster.restart(leader)
        assert new_leader not in (leader, -1), f"the leader of {topic}-{partition} did not change: the fault did not fire"


@pytest.mark.parametrize("engine", ENGINES)
def test_a_kept_consumer_reads_a_topic_recreated_below_its_leader_epoch(
        kafka_cluster: LocalCluster, engine: str, caplog: pytest.LogCaptureFixture) -> None:
    kafka = kafka_cluster.kafka
    IDLE_CONSUMERS.close_all()
    topic = kafka.create_topic(2)
    kafka.produce_plain(topic, [Sent(p, None, f"old-{p}-{i}".encode()) for p in range(2) for i in range(5)])
    raise_leader_epoch(kafka_cluster, topic, 2)
    options = parse_reader_options({"kafka.bootstrap.servers": kafka_cluster.bootstrap_servers, "subscribe": topic,
                                    "readEngine": engine, "failOnDataLoss": "false",
                                    "kafkaConsumer.pollTimeoutMs": str(POLL_TIMEOUT_MS)}, streaming=False)
    before = values(list(read_offset_ranges(options, [OffsetRange(topic, p, 0, 5) for p in range(2)])))
    assert sorted(before) == sorted(f"old-{p}-{i}".encode() for p in range(2) for i in range(5))
    assert len(IDLE_CONSUMERS) == 2, "the reads of the old topic kept no consumer: nothing is tested"

    kafka.recreate_topic(topic, 2)
    sent = [Sent(p, None, f"new-{p}-{i}".encode()) for p in range(2) for i in range(10)]
    kafka.produce_plain(topic, sent)
    committed = sorted(r.value for r in kafka.read_committed(topic))
    assert committed == sorted(s.value for s in sent)  # the independent consumer's count: the 20 records are there

    began = time.monotonic()
    with caplog.at_level(logging.INFO, logger="spark_kafka_eos"):
        after = values(list(read_offset_ranges(options, [OffsetRange(topic, p, 0, 10) for p in range(2)])))
    took = time.monotonic() - began
    assert sorted(after) == committed
    assert took < 15, f"reading the re-created topic took {took:.1f}s"
    # The kept consumers were stale, and were replaced (the second range's at once: the first found the topic's stale).
    assert caplog.text.count("reading on with a new consumer") == 2, caplog.text
    IDLE_CONSUMERS.close_all()

