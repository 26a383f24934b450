"""A topic missing from one metadata answer is not taken for deleted (issue 49 items 2 and 7).

Item 2: a subscribePattern query whose principal loses its ACLs on a topic it reads (Kafka then leaves the topic
out of the metadata, as if it were deleted), on the broker that enforces ACLs (tests/harness/secured_kafka.py),
through Spark, on each engine. b0050cf took the topic for deleted: with failOnDataLoss=false it went on without
it and, once the ACL was back, read it again from its earliest offset (duplicates, silently); with true it failed
with a false "no longer exist". Now the query fails with the ACL to grant, and run again from its checkpoint once
the ACL is back it delivers every record once, as counted by an independent read_committed consumer. The same on a
three-broker cluster that enforces ACLs whose topics' leader epochs are above 0 (every node killed and restarted
after the first records were written, as production is; long tier).

Item 7: a topic deleted between the listing and the offset look-up of one plan (UNKNOWN_TOPIC_OR_PART from
ListOffsets) follows failOnDataLoss; b0050cf raised KafkaEosDataLossError whatever it said.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ClusterMetadata,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.datasource import ReadAllAvailable

from spark_kafka_eos._internal.config.reader import PartitionKey, Subscription, parse_reader_options
from spark_kafka_eos._internal.read.offset_lookup import KafkaOffsetLookup
from spark_kafka_eos._internal.read.planner import ranges_of
from spark_kafka_eos._internal.read.topic_check import current_ids
from spark_kafka_eos.errors import KafkaEosAuthorizationError, KafkaEosDataLossError
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.secured_kafka import READER, SecuredCluster, SecuredKafka, allow
from tests.harness.stream import stream_reader
from tests.integration.read.test_reader_differential_cluster import leader_epochs

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    broker = SecuredKafka(tmp_path_factory.mktemp("secured-kafka"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def fill(kafka: KafkaTestCluster, topic: str, per_partition: int, tag: str, partitions: int = 2) -> list[bytes]:
    sent = kafka.produce_plain(topic, [Sent(p, None, f"{tag}-{p}-{i}".encode()) for p in range(partitions) for i in range(per_partition)])
    return [r.value or b"" for r in sent]


def set_acls(admin: AdminClient, topic: str, granted: bool) -> None:
    """Grant, or remove, the reader's Read and Describe on ``topic``."""
    if granted:
        for future in admin.create_acls(allow(ResourceType.TOPIC, topic, AclOperation.READ, AclOperation.DESCRIBE)).values():
            future.result(30)
        return
    doomed = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{READER}", "*",
                              AclOperation.ANY, AclPermissionType.ANY)
    for future in admin.delete_acls([doomed]).values():
        future.result(30)


def seen_by_reader(options: dict[str, str], topic: str) -> bool:
    """Whether the reader's own metadata answer lists ``topic`` (what a pattern sees)."""
    admin = AdminClient({
        "bootstrap.servers": options["kafka.bootstrap.servers"], "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": options["kafka.sasl.username"], "sasl.password": options["kafka.sasl.password"],
    })
    return topic in admin.list_topics(timeout=30).topics


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s}s")
        time.sleep(0.25)


Prepared = tuple[str, str, list[bytes]]
"""A pattern's prefix, its one topic and the records written to it first."""


def prepare(kafka: KafkaTestCluster) -> Prepared:
    """A topic of 2 partitions under a prefix of its own, the reader granted Read and Describe on it, 5 records in each partition."""
    prefix = f"doubt{uuid.uuid4().hex[:8]}"
    topic = kafka.create_topic(2, prefix=prefix)
    set_acls(kafka.admin, topic, granted=True)
    return prefix, topic, fill(kafka, topic, 5, "first")


@pytest.fixture(scope="module")
def rolled_secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SecuredCluster, list[Prepared]]]:
    """A three-broker cluster that enforces ACLs, with a prepared topic for each of the four cases, then every node
    SIGKILLed and restarted in turn: every partition of those topics has a leader epoch above 0."""
    cluster = SecuredCluster(tmp_path_factory.mktemp("secured-cluster"))
    cluster.start()
    try:
        prepared = [prepare(cluster.kafka) for _ in range(4)]
        for node in cluster.node_ids:
            cluster.kill(node)
            cluster.restart(node)
        for _, topic, _ in prepared:
            epochs = leader_epochs(cluster.kafka, topic)
            assert epochs and min(epochs.values()) > 0, f"leader epochs of {topic} still at 0 after the rolling restart: {epochs}"
        yield cluster, prepared
    finally:
        for node_id in cluster.node_ids:
            if cluster.running(node_id):
                cluster.kill(node_id)


@pytest.mark.parametrize("fail_on_data_loss", ["false", "true"])
def test_a_pattern_topic_whose_acls_were_removed_is_an_authorization_error_not_a_deletion(
    spark: SparkSession, secured: SecuredKafka, tmp_path: Path, read_engine: str, fail_on_data_loss: str
) -> None:
    kafka = KafkaTestCluster(secured.bootstrap_servers)  # the super user's listener: topics, ACLs, records
    acls_removed_from_a_pattern_topic(spark, kafka, secured.reader_options(), prepare(kafka), tmp_path, read_engine, fail_on_data_loss)


@pytest.mark.long  # a three-broker cluster, rolling restart: make test-all
@pytest.mark.parametrize("fail_on_data_loss", ["false", "true"])
def test_on_a_rolled_cluster_a_pattern_topic_whose_acls_were_removed_is_an_authorization_error_not_a_deletion(
    spark: SparkSession, rolled_secured: tuple[SecuredCluster, list[Prepared]], tmp_path: Path, read_engine: str,
    fail_on_data_loss: str,
) -> None:
    cluster, prepared = rolled_secured
    acls_removed_from_a_pattern_topic(spark, cluster.kafka, cluster.reader_options(), prepared.pop(), tmp_path, read_engine,
                                      fail_on_data_loss)


def acls_removed_from_a_pattern_topic(spark: SparkSession, kafka: KafkaTestCluster, reader_options: dict[str, str],
                                      prepared: Prepared, tmp_path: Path, read_engine: str, fail_on_data_loss: str) -> None:
    """A pattern query reads the prepared topic; the reader's ACLs on it are removed: the query must fail with an
    authorization error, and once they are back, run again from its checkpoint, deliver every record once.
    ``kafka``: the super user's listener (topics, ACLs, records, the independent consumer)."""
    prefix, topic, first = prepared
    checkpoint = str(tmp_path / "checkpoint")
    seen: list[bytes] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        seen.extend(bytes(r.value) for r in df.select("value").collect())

    def run() -> StreamingQuery:
        reader = spark.readStream.format("kafka_eos")
        options = {**reader_options, "subscribePattern": f"^{prefix}-.*", "startingOffsets": "earliest",
                   "failOnDataLoss": fail_on_data_loss, "readEngine": read_engine, "fetchOffset.retryIntervalMs": "200"}
        for name, value in options.items():
            reader = reader.option(name, value)
        writer = reader.load().writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint)
        return writer.trigger(processingTime="1 second").start()

    query = run()
    try:
        wait_for(lambda: len(seen) >= len(first), 120, "the first records arriving")
        set_acls(kafka.admin, topic, granted=False)
        # Every broker applies the ACL change from the metadata log on its own: asked until the answer drops the topic.
        wait_for(lambda: not seen_by_reader(reader_options, topic), 30,
                 "the reader's metadata dropping the topic (the fault firing)")
        # Triggers with the topic out of the metadata; b0050cf went on (false) or failed (true) here.
        deadline = time.monotonic() + 8
        while query.isActive and time.monotonic() < deadline:
            time.sleep(0.25)
        failure = query.exception()
        set_acls(kafka.admin, topic, granted=True)
        wait_for(lambda: seen_by_reader(reader_options, topic), 30, "the reader's metadata listing the topic again")
        later = fill(kafka, topic, 3, "later")
        if query.isActive:  # b0050cf with failOnDataLoss=false: it read the topic again from its earliest offset
            time.sleep(10)
        else:
            query = run()  # from the checkpoint, once the ACL is back
        counted = [r.value or b"" for r in kafka.read_committed(topic)]
        assert sorted(counted) == sorted(first + later)
        wait_for(lambda: len(seen) >= len(counted), 120, "every record arriving")
        time.sleep(3)  # a few more triggers: nothing may arrive twice
        assert Counter(seen) == Counter(counted), "records lost or read twice"
    finally:
        query.stop()
    assert failure is not None, "the query went on as if the topic were deleted"
    message = str(failure)
    assert "KafkaEosAuthorizationError" in message and f"--operation Describe --operation Read --topic {topic}" in message, message
    assert "no longer exist" not in message


def test_a_topic_whose_acls_were_removed_before_its_id_is_asked_is_an_authorization_error(secured: SecuredKafka) -> None:
    """The driver's id look-up (each plan) and the task's check (each range) may be the first calls after the ACLs
    went: DescribeTopics then answers TOPIC_AUTHORIZATION_FAILED, which must name the ACL to grant, as the other
    calls do, not surface as a raw KafkaException."""
    kafka = KafkaTestCluster(secured.bootstrap_servers)
    _, topic, _ = prepare(kafka)
    options = parse_reader_options({**secured.reader_options(), "subscribe": topic}, streaming=True)
    assert KafkaOffsetLookup(options).topic_ids([topic]), "the reader could not describe its topic while granted"
    set_acls(kafka.admin, topic, granted=False)
    wait_for(lambda: not seen_by_reader(secured.reader_options(), topic), 30, "the reader's metadata leaving the topic out")
    fix = f"--operation Describe --operation Read --topic {topic}"
    with pytest.raises(KafkaEosAuthorizationError, match="DescribeTopics") as driver:
        KafkaOffsetLookup(options).topic_ids([topic])
    assert fix in str(driver.value)
    with pytest.raises(KafkaEosAuthorizationError, match="DescribeTopics") as task:
        current_ids(options, [topic])
    assert fix in str(task.value)


class DeletesAfterListing(KafkaOffsetLookup):
    """The real look-up, with a real fault: right after the next listing, ``victim`` is deleted, so the plan's
    ListOffsets for it answers UNKNOWN_TOPIC_OR_PART. ``fired``: that answer, seen by an independent admin client."""

    victim: str | None = None
    kafka: KafkaTestCluster
    fired: list[str]

    def partitions(self, subscription: Subscription, must_exist: bool) -> list[PartitionKey]:
        listed = super().partitions(subscription, must_exist)
        if self.victim is not None and any(t == self.victim for t, _ in listed):
            victim, self.victim = self.victim, None
            self.kafka.delete_topic(victim)
            future = self.kafka.admin.list_offsets({TopicPartition(victim, 0): OffsetSpec.latest()}, request_timeout=10)
            try:
                next(iter(future.values())).result(10)
            except KafkaException as err:
                self.fired.append(err.args[0].name())
        return listed


def lookup_deleting(reader: object, kafka: KafkaTestCluster, victim: str) -> DeletesAfterListing:
    lookup = DeletesAfterListing(reader.options)  # type: ignore[attr-defined]
    lookup.kafka, lookup.victim, lookup.fired = kafka, victim, []
    reader._lookup = lookup  # type: ignore[attr-defined]
    return lookup


def offsets_of(end: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {t: dict(p) for t, p in end.items() if not t.startswith("@")}


@pytest.mark.parametrize("fail_on_data_loss", ["false", "true"])
def test_a_topic_deleted_between_listing_and_offsets_follows_fail_on_data_loss(kafka: KafkaTestCluster, fail_on_data_loss: str) -> None:
    prefix = f"gone{uuid.uuid4().hex[:8]}"
    kept, doomed = kafka.create_topic(1, prefix=prefix), kafka.create_topic(1, prefix=prefix)
    for topic in (kept, doomed):
        fill(kafka, topic, 4, topic, partitions=1)
    reader = stream_reader(kafka, subscribePattern=f"^{prefix}-.*", failOnDataLoss=fail_on_data_loss, **{"fetchOffset.retryIntervalMs": "50"})
    position = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert offsets_of(position) == {kept: {"0": 4}, doomed: {"0": 4}}
    fill(kafka, kept, 2, "more", partitions=1)
    lookup = lookup_deleting(reader, kafka, doomed)
    if fail_on_data_loss == "true":
        with pytest.raises(KafkaEosDataLossError, match=rf"{doomed}-0 \(the query stands at offset 4\).*failOnDataLoss=false"):
            reader.latestOffset(position, ReadAllAvailable())
    else:
        assert offsets_of(reader.latestOffset(position, ReadAllAvailable())) == {kept: {"0": 6}}
    assert lookup.fired == ["UNKNOWN_TOPIC_OR_PART"], "ListOffsets did not answer UNKNOWN_TOPIC_OR_PART: the fault did not fire"


class ListingLeavesOut(KafkaOffsetLookup):
    """The real look-up, whose cluster listings leave ``hidden`` out, as a broker whose metadata lags answers: asked by
    name, the real broker shows it."""

    hidden: str = ""

    def _metadata(self) -> ClusterMetadata:
        metadata = super()._metadata()
        metadata.topics.pop(self.hidden, None)
        return metadata


@pytest.mark.parametrize("fail_on_data_loss", ["false", "true"])
def test_a_topic_left_out_of_every_listing_but_visible_by_name_is_not_taken_for_deleted(
        kafka: KafkaTestCluster, fail_on_data_loss: str, caplog: pytest.LogCaptureFixture) -> None:
    """Before, the stale listing won: the topic was dropped (and under false, read again from its earliest offset
    once listed again). Visible by name, it is there: the stream reads on from its position, nothing lost or twice."""
    prefix = f"lag{uuid.uuid4().hex[:8]}"
    kept, lagging = kafka.create_topic(1, prefix=prefix), kafka.create_topic(1, prefix=prefix)
    for topic in (kept, lagging):
        fill(kafka, topic, 4, topic, partitions=1)
    reader = stream_reader(kafka, subscribePattern=f"^{prefix}-.*", failOnDataLoss=fail_on_data_loss,
                           **{"fetchOffset.retryIntervalMs": "50"})
    position = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    fill(kafka, lagging, 3, "more", partitions=1)
    lookup = ListingLeavesOut(reader.options)
    lookup.hidden = lagging
    reader._lookup = lookup  # type: ignore[attr-defined]

    end = reader.latestOffset(position, ReadAllAvailable())
    assert offsets_of(end) == {kept: {"0": 4}, lagging: {"0": 7}}
    ranges = [(r.topic, r.start, r.end) for p in reader.partitions(position, end) for r in ranges_of(p)]
    assert ranges == [(lagging, 4, 7)]
    assert not [r for r in caplog.records if "no longer exist" in r.getMessage()]
