"""The reader's promises in README ("Reading", "Options"), each on the real broker and judged by an
independent confluent_kafka client or by Kafka's own tools: pattern subscriptions, the fetch group
that is never used, the stall timeout, a task's memory bounded by its batch size, and records without
a timestamp."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import NewTopic
from pyspark.sql import SparkSession

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.offset_lookup import KafkaOffsetLookup
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import run_kafka_tool
from tests.harness.local_kafka import LocalKafka
from tests.harness.memory_probe import peak_task_rss_kib
from tests.harness.spark import assert_same_records, kafka_eos
from tests.harness.stream import stream, to_memory, values

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

CONFIG_COMMAND = "kafka.admin.ConfigCommand"
# Kafka's internal topics (org.apache.kafka.common.internals.Topic: the metadata's is_internal flag).
KAFKA_INTERNAL_TOPICS = {"__consumer_offsets", "__transaction_state", "__share_group_state"}


def _create_exact_topic(kafka: KafkaTestCluster, name: str) -> str:
    """Create ``name`` as is (``create_topic`` makes up a unique name) with one partition."""
    kafka.admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(30)
    kafka._wait_for_partitions(name, 1)
    return name


def _pattern_topics(kafka: KafkaTestCluster, pattern: str) -> set[str]:
    """The topics the driver's offset lookup subscribes to for ``subscribePattern=pattern``."""
    options = parse_reader_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribePattern": pattern}, streaming=False)
    return {topic for topic, _ in KafkaOffsetLookup(options).partitions(options.subscription, must_exist=False)}


def test_subscribe_pattern_is_found_anywhere_in_a_name_as_in_spark_and_skips_internal_topics(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    base = f"orders{uuid.uuid4().hex[:8]}"
    orders, regional, prefixed = (_create_exact_topic(kafka, name) for name in (base, f"{base}-eu", f"x{base}"))
    for topic in (orders, regional, prefixed):
        kafka.produce_plain(topic, [Sent(0, None, topic.encode())])
    # Internal topics exist once a group committed and a transaction was used.
    kafka.open_transaction(orders, [Sent(0, None, b"committed")]).commit()
    group = f"promises-{uuid.uuid4().hex[:8]}"
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(orders, 0, 1)])
    kafka.admin.alter_consumer_group_offsets([request])[group].result(30)
    internal = set(kafka.admin.list_topics(timeout=10).topics) & KAFKA_INTERNAL_TOPICS
    assert {"__consumer_offsets", "__transaction_state"} <= internal

    assert_same_records(kafka_eos(spark, kafka, subscribePattern=f"^{base}$"), kafka.read_committed(orders))
    assert_same_records(
        kafka_eos(spark, kafka, subscribePattern=f"^{base}.*"), kafka.read_committed(orders) + kafka.read_committed(regional)
    )
    assert _pattern_topics(kafka, base) == {orders, regional, prefixed}
    everything = _pattern_topics(kafka, ".*")
    assert {orders, regional, prefixed} <= everything and not everything & internal
    assert not _pattern_topics(kafka, "__.*") & internal
    assert _pattern_topics(kafka, "__consumer_offsets") == set()


def test_subscribe_pattern_reads_a_user_topic_whose_name_starts_with_two_underscores(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """As in Spark, only Kafka's internal topics (the metadata's is_internal flag: __consumer_offsets,
    __transaction_state, __share_group_state) are left out, not every topic named ``__...``: Debezium's
    heartbeat topics are ``__debezium-heartbeat.<prefix>``."""
    server = f"eos{uuid.uuid4().hex[:8]}"
    heartbeat = _create_exact_topic(kafka, f"__debezium-heartbeat.{server}")
    kafka.produce_plain(heartbeat, [Sent(0, None, f"beat{i}".encode()) for i in range(3)])
    kafka.open_transaction(heartbeat, [Sent(0, None, b"committed")]).commit()  # __transaction_state exists
    internal = set(kafka.admin.list_topics(timeout=10).topics) & KAFKA_INTERNAL_TOPICS
    assert "__transaction_state" in internal

    assert_same_records(kafka_eos(spark, kafka, subscribePattern=rf"__debezium-heartbeat\.{server}.*"), kafka.read_committed(heartbeat))
    assert len(kafka.read_committed(heartbeat)) == 4
    underscored = _pattern_topics(kafka, "__.*")
    assert heartbeat in underscored and not underscored & internal


def _groups_with_prefix(kafka: KafkaTestCluster, prefix: str) -> list[str]:
    listed = kafka.admin.list_consumer_groups(request_timeout=30).result(30)
    return [g.group_id for g in listed.valid if g.group_id.startswith(prefix)]


def _assert_group_unused(kafka: KafkaTestCluster, group: str, topic: str) -> None:
    """``group`` has no member now and no committed offset on ``topic``."""
    description = kafka.admin.describe_consumer_groups([group], request_timeout=30)[group].result(30)
    assert not description.members, f"{group} has members {description.members}"
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
    offsets = kafka.admin.list_consumer_group_offsets([request], request_timeout=30)[group].result(30)
    assert [tp.offset for tp in offsets.topic_partitions if tp.offset >= 0] == [], f"{group} committed offsets"


def test_the_fetch_group_is_never_joined_and_nothing_is_committed(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, f"v{i}".encode()) for i in range(20)])
    prefix = f"promise-prefix-{uuid.uuid4().hex[:8]}"
    exact = f"promise-group-{uuid.uuid4().hex[:8]}"
    for options in ({"groupIdPrefix": prefix}, {"kafka.group.id": exact}):
        assert len(kafka_eos(spark, kafka, subscribe=topic, **{k.replace(".", "__"): v for k, v in options.items()}).collect()) == 20
        query, name = to_memory(stream(spark, kafka, subscribe=topic, **options), tmp_path)
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        assert len(values(spark, name)) == 20
    for group in [*_groups_with_prefix(kafka, prefix), exact]:
        _assert_group_unused(kafka, group, topic)
    # The judge can see a group that did commit: the same checks fail on one.
    committed = f"{prefix}-judge"
    request = ConsumerGroupTopicPartitions(committed, [TopicPartition(topic, 0, 5)])
    kafka.admin.alter_consumer_group_offsets([request])[committed].result(30)
    with pytest.raises(AssertionError, match="committed offsets"):
        _assert_group_unused(kafka, committed, topic)


def _client_quota(kafka: KafkaTestCluster, client_id: str, change: str) -> None:
    """Kafka's ConfigCommand on the quota of ``client_id``: ``change`` is ``--add-config k=v`` or ``--delete-config k``."""
    flag, setting = change.split(" ", 1)
    run_kafka_tool(
        CONFIG_COMMAND, "--bootstrap-server", kafka.bootstrap_servers, "--alter", flag, setting,
        "--entity-type", "clients", "--entity-name", client_id,
    )


def test_a_range_throttled_by_a_quota_fails_after_the_poll_timeout(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, bytes(1024)) for _ in range(300)])
    client_id = f"throttled-{uuid.uuid4().hex[:8]}"
    _client_quota(kafka, client_id, "--add-config consumer_byte_rate=10")
    try:
        time.sleep(1)  # the broker applies the quota from the metadata log
        started = time.monotonic()
        with pytest.raises(Exception, match="kafkaConsumer.pollTimeoutMs") as failure:
            kafka_eos(
                spark, kafka, subscribe=topic, kafka__client__id=client_id, kafka__max__partition__fetch__bytes=4096,
                kafkaConsumer__pollTimeoutMs=5000,
            ).collect()
        elapsed = time.monotonic() - started
    finally:
        _client_quota(kafka, client_id, "--delete-config consumer_byte_rate")
    assert 5 <= elapsed < 60, f"failed after {elapsed:.1f}s: {failure.value}"
    # Without the quota the same read delivers everything.
    assert len(kafka_eos(spark, kafka, subscribe=topic, kafka__client__id=client_id).collect()) == 300


def test_a_record_without_a_timestamp_reads_as_null_with_type_minus_one(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, b"no timestamp", timestamp_ms=-1), Sent(0, None, b"stamped", timestamp_ms=1_700_000_000_000)])
    # The broker keeps the producer's "no timestamp" (-1), as the independent consumer shows.
    assert [r.timestamp_ms for r in kafka.read_committed(topic)] == [-1, 1_700_000_000_000]
    rows = {bytes(r.value): r for r in kafka_eos(spark, kafka, subscribe=topic).collect()}
    assert (rows[b"no timestamp"].timestamp, rows[b"no timestamp"].timestampType) == (None, -1)
    assert rows[b"stamped"].timestampType == 0 and rows[b"stamped"].timestamp is not None


@pytest.mark.long  # a memory probe: the long tier's
def test_a_tasks_memory_does_not_grow_with_the_partition(kafka: KafkaTestCluster) -> None:
    """Peak RSS of the reading task for 10k and 40k records of 1 KiB (one partition each). With batches
    unbounded (maxRecordsPerBatch=1000000, maxBytesPerBatch=1g) the same probe saw ~100 MiB of growth."""
    small, large, value = 10_000, 40_000, bytes(1024)
    topics = []
    for count in (small, large):
        topics.append(kafka.create_topic(1))
        kafka.produce_plain(topics[-1], (Sent(0, None, value) for _ in range(count)))
    bounded = {"maxRecordsPerBatch": "1000", "maxBytesPerBatch": str(1 << 20)}
    (read_small, peak_small), (read_large, peak_large) = peak_task_rss_kib(kafka.bootstrap_servers, topics, bounded)
    assert (read_small, read_large) == (small, large)
    growth_kib, data_difference_kib = peak_large - peak_small, (large - small) * len(value) // 1024
    assert growth_kib < data_difference_kib // 4, f"task peak RSS grew {peak_small} -> {peak_large} KiB for {data_difference_kib} KiB more data"


def test_offset_lookups_wait_out_a_paused_broker_and_fail_clearly_when_it_stays_away(spark: SparkSession, tmp_path: Path) -> None:
    """A private broker frozen with SIGSTOP while the driver plans. The retries of fetchOffset.numRetries
    all share one kafka.socket.timeout.ms, so what outlasts the pause is that timeout, not the retries."""
    with LocalKafka(tmp_path / "kafka") as broker:
        private = KafkaTestCluster(broker.bootstrap_servers)
        topic = private.create_topic(1)
        private.produce_plain(topic, [Sent(0, None, f"v{i}".encode()) for i in range(20)])
        expected = private.read_committed(topic)
        assert broker._process is not None
        group = broker._process.pid
        resume = threading.Timer(2.0, os.killpg, (group, signal.SIGCONT))
        try:
            os.killpg(group, signal.SIGSTOP)
            resume.start()
            assert_same_records(kafka_eos(spark, private, subscribe=topic, kafka__socket__timeout__ms=30_000), expected)
            resume.join()
            os.killpg(group, signal.SIGSTOP)
            started = time.monotonic()
            with pytest.raises(Exception, match="fetchOffset.numRetries"):
                kafka_eos(spark, private, subscribe=topic, kafka__socket__timeout__ms=3000, fetchOffset__numRetries=0).collect()
            assert time.monotonic() - started < 60
        finally:
            resume.cancel()
            os.killpg(group, signal.SIGCONT)
