"""The three-broker cluster of tests/harness/local_cluster.py, and exactly-once writes on it while a
partition leader crashes (SIGKILL) and comes back."""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from collections import Counter

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, ConfigSource, NewTopic, ResourceType
from pyspark.sql import SparkSession

from spark_kafka_eos._internal.config.writer import parse_writer_options
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.records import EpochId
from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
from spark_kafka_eos._internal.write.task_producer import TaskIdentity, write_task
from spark_kafka_eos.errors import KafkaEosError
from tests.harness.kafka import KafkaTestCluster
from tests.harness.kafka_tools import assert_stable, open_transactions_by_kafka
from tests.harness.local_cluster import LocalCluster

pytestmark = [pytest.mark.kafka]
DEFAULT_DECISION_LOG = "_kafka_eos_decisions"


def topic_config(kafka: KafkaTestCluster, topic: str, name: str) -> tuple[str, ConfigSource]:
    """The value of one topic setting and where it comes from (topic override, broker default...), once the
    answering broker knows the new topic (it may learn of it after the controller and the other brokers)."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    deadline = time.monotonic() + 30
    while True:
        try:
            entry = kafka.admin.describe_configs([resource], request_timeout=30)[resource].result(30)[name]
            return entry.value, ConfigSource(entry.source)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def replicas(kafka: KafkaTestCluster, topic: str) -> list[list[int]]:
    """Each partition's replica list, once the answering broker's metadata has the new topic's partitions
    (create_topics returns when the controller has them; a broker may learn them a moment later)."""
    deadline = time.monotonic() + 30
    while True:
        partitions = kafka.admin.list_topics(topic, timeout=10).topics[topic].partitions
        if partitions or time.monotonic() > deadline:
            return [list(partitions[p].replicas) for p in sorted(partitions)]
        time.sleep(0.1)


def test_three_brokers_and_new_topics_get_three_replicas_and_two_in_sync(kafka_cluster: LocalCluster) -> None:
    kafka = kafka_cluster.kafka
    assert kafka_cluster.broker_ids() == [1, 2, 3]
    topic = f"defaults-{uuid.uuid4().hex[:8]}"
    kafka.admin.create_topics([NewTopic(topic, 2)], operation_timeout=30)[topic].result(30)  # the cluster's defaults
    assert [sorted(r) for r in replicas(kafka, topic)] == [[1, 2, 3], [1, 2, 3]]
    # The cluster's default (Kafka 4 keeps the controllers' min.insync.replicas as a cluster-wide dynamic default).
    value, source = topic_config(kafka, topic, "min.insync.replicas")
    assert (value, source in (ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)) == ("2", True)


class TransactionalWriter(threading.Thread):
    """Writes epochs of ten records to ``topic`` through the package (a task's transaction, then the
    coordinator's two-phase commit) until stopped. An epoch whose commit fails is settled by the
    coordinator's recovery, then filed as committed or aborted by what the prefix decided; the test
    checks that filing against an independent read_committed consumer."""

    def __init__(self, kafka: KafkaTestCluster, topic: str, bootstrap_servers: str, deadline_s: float = 240.0) -> None:
        super().__init__(daemon=True)
        self.kafka, self.topic, self.deadline = kafka, topic, time.monotonic() + deadline_s
        self.options = parse_writer_options({"kafka.bootstrap.servers": bootstrap_servers, "topic": topic,
                                             "transactional.id.prefix": f"under-fire-{uuid.uuid4().hex[:8]}"}, streaming=False)
        self.committed: list[bytes] = []
        self.aborted: list[bytes] = []
        self.failed_commits = 0
        self.commit_times: list[float] = []
        self.error: BaseException | None = None
        self._stop_requested = threading.Event()

    def run(self) -> None:
        try:
            epoch = 0
            while not self._stop_requested.is_set() and time.monotonic() < self.deadline:
                self._one_epoch(EpochId.batch(f"e{epoch}"), [f"b{epoch}-r{r}".encode() for r in range(10)])
                epoch += 1
        except BaseException as err:  # noqa: BLE001 - handed to the test thread
            self.error = err

    def _one_epoch(self, epoch: EpochId, values: list[bytes]) -> None:
        coordinator = TwoPhaseCommitCoordinator(self.options, 60_000)
        batch = pa.record_batch([pa.array(values, pa.binary())], names=["value"])
        try:
            coordinator.prepare(epoch)
            task = write_task(self.options, epoch, [batch], task=TaskIdentity(0, 0, 0), transaction_timeout_ms=60_000)
            coordinator.commit(epoch, [task])
        except KafkaEosError:
            self.failed_commits += 1
            self._settle(coordinator)
            last = KafkaDecisionLog(self.options).last(self.options.prefix)
            (self.committed if last is not None and last.last_decided(epoch) == epoch else self.aborted).extend(values)
            return
        self.committed.extend(values)
        self.commit_times.append(time.monotonic())

    def _settle(self, coordinator: TwoPhaseCommitCoordinator) -> None:
        while True:
            try:
                coordinator.recover()
                return
            except KafkaEosError:
                if time.monotonic() > self.deadline:
                    raise
                time.sleep(1)

    def wait_for_commits(self, count: int, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.commit_times) < count:
            assert self.error is None, f"the writer failed: {self.error!r}"
            assert time.monotonic() < deadline, f"only {len(self.commit_times)} of {count} commits in {timeout_s}s"
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop_requested.set()
        self.join(120)
        assert not self.is_alive(), "the writer did not stop"


@pytest.mark.long
def test_killing_a_partition_leader_under_the_sink_loses_and_duplicates_nothing(kafka_cluster: LocalCluster) -> None:
    kafka = kafka_cluster.kafka
    topic = kafka.create_topic(1, prefix="under-fire")
    writer = TransactionalWriter(kafka, topic, kafka_cluster.bootstrap_servers)
    writer.start()
    try:
        writer.wait_for_commits(3)
        leader = kafka_cluster.leader_of(topic)
        commits_before = len(writer.commit_times)
        killed_at = time.monotonic()
        exit_code = kafka_cluster.kill(leader)
        try:
            # The fault fired: the leader's JVM died of SIGKILL, and another replica leads now.
            assert exit_code == -signal.SIGKILL and not kafka_cluster.running(leader)
            new_leader = kafka_cluster.wait_for_leader(topic, other_than=leader)
            writer.wait_for_commits(commits_before + 1)
            recovery_s = writer.commit_times[commits_before] - killed_at
        finally:
            rejoin_s = kafka_cluster.restart(leader)
        writer.wait_for_commits(len(writer.commit_times) + 3)
    finally:
        writer.stop()
    assert writer.error is None, f"the writer failed: {writer.error!r}"
    print(f"leader {leader} killed -> {new_leader}; next commit after {recovery_s:.1f}s; node back in the ISR after {rejoin_s:.1f}s; "
          f"{writer.failed_commits} epochs failed and were settled by recovery")
    assert new_leader != leader and kafka_cluster.leader_of(topic) != -1

    kafka.wait_until_stable(topic)
    counts = Counter(r.value for r in kafka.read_committed(topic))
    assert {v: n for v, n in counts.items() if n > 1} == {}, "duplicated records"
    assert set(writer.committed) - set(counts) == set(), "lost committed records"
    assert set(counts) - set(writer.committed) == set(), "records of aborted epochs are visible"
    assert open_transactions_by_kafka(kafka_cluster.bootstrap_servers, writer.options.prefix + "-") == []


@pytest.mark.spark
def test_a_kafka_eos_batch_write_to_the_cluster_is_exactly_once_with_a_replicated_decision_log(
    spark: SparkSession, kafka_cluster: LocalCluster
) -> None:
    kafka = kafka_cluster.kafka
    topic = kafka.create_topic(3, prefix="cluster-sink")
    prefix = f"cluster-{uuid.uuid4().hex[:8]}"
    df = spark.range(0, 300, numPartitions=3).selectExpr("CAST(id AS STRING) AS key", "CONCAT('v', CAST(id AS STRING)) AS value")
    (
        df.write.format("kafka_eos").mode("append")
        .option("kafka.bootstrap.servers", kafka_cluster.bootstrap_servers)
        .option("topic", topic)
        .option("transactional.id.prefix", prefix)
        .save()
    )
    kafka.wait_until_stable(topic)
    counts = Counter(r.value for r in kafka.read_committed(topic))
    assert counts == Counter(f"v{i}".encode() for i in range(300))
    assert open_transactions_by_kafka(kafka_cluster.bootstrap_servers, prefix + "-") == []
    assert_stable(kafka, topic, DEFAULT_DECISION_LOG)
    assert [len(r) for r in replicas(kafka, DEFAULT_DECISION_LOG)] == [3]
    # Set on the topic by the package, not inherited from the cluster's default (also 2).
    assert topic_config(kafka, DEFAULT_DECISION_LOG, "min.insync.replicas") == ("2", ConfigSource.DYNAMIC_TOPIC_CONFIG)


def test_a_sweep_aborts_what_the_live_brokers_list_while_one_broker_is_down(
        kafka_cluster: LocalCluster, caplog: pytest.LogCaptureFixture) -> None:
    """Each broker lists only the transactions it coordinates. With one broker down, the transactions it
    coordinated move with the leadership of __transaction_state, so what the live brokers list is what can
    be aborted; failing the whole sweep would leave them pinning the sink's LSO."""
    kafka = kafka_cluster.kafka
    topic, prefix = kafka.create_topic(1, prefix="sweep-sink"), f"sweep-{uuid.uuid4().hex[:8]}"
    options = parse_writer_options({"kafka.bootstrap.servers": kafka_cluster.bootstrap_servers, "topic": topic,
                                    "transactional.id.prefix": prefix}, streaming=True)
    batch = pa.record_batch([pa.array([b"left open"], pa.binary())], names=["value"])
    straggler = write_task(options, EpochId.stream("q", 0), [batch], task=TaskIdentity(0, 0, 0), transaction_timeout_ms=60_000)
    assert straggler.transaction is not None
    kept = {kafka_cluster.transaction_coordinator(straggler.transaction.transactional_id),
            kafka_cluster.transaction_coordinator(f"{prefix}-coordinator")}
    down = next(node for node in kafka_cluster.broker_ids() if node not in kept)
    kafka_cluster.kill(down)
    try:
        with caplog.at_level(logging.DEBUG, logger="spark_kafka_eos._internal.txn.session"):
            TwoPhaseCommitCoordinator(options, 60_000).recover()
        # The fault met the sweep: its last round was answered by every broker but the one down (which
        # failed in earlier rounds, or had already left the metadata).
        rounds = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ListTransactions round")]
        live = [node for node in kafka_cluster.node_ids if node != down]
        assert rounds and rounds[-1].endswith(f"answered by {live}, not by []"), rounds
        assert open_transactions_by_kafka(kafka_cluster.bootstrap_servers, prefix + "-") == []
    finally:
        kafka_cluster.restart(down)
    kafka.wait_until_stable(topic)
    assert kafka.read_committed(topic) == []
