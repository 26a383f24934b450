"""The coordinator's promises (README, "Writing"), on the real broker without Spark: every participant is
verified before the decision, and the decision log topic is created as recovery needs it."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import ConfigResource, ConfigSource, OffsetSpec, ResourceType

from spark_kafka_eos._internal.cluster import open_session
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
from spark_kafka_eos.errors import KafkaEosEpochAbortedError
from tests.harness.coordinator import TIMEOUT_MS, committed_values, prepare, sink_options, stream_epoch
from tests.harness.kafka import KafkaTestCluster, OpenTransaction, Sent
from tests.harness.pipeline import open_transactions

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("fate", ["aborted", "fenced", "fenced and reopened"])
def test_a_participant_that_is_no_longer_open_is_never_decided(kafka: KafkaTestCluster, fate: str) -> None:
    """One of two prepared participants lost its transaction before the decision: aborted (as the broker
    does at its timeout), fenced by a producer that initialised the same transactional id, or fenced by
    one that opened a transaction of its own under that id (open, but not the participant's producer
    epoch). The coordinator refuses to decide: no decision record, nothing visible, nothing left open."""
    topic = kafka.create_topic(2)
    options = sink_options(kafka, topic)
    healthy, lost = prepare(options, 0, ["healthy"]), prepare(options, 1, ["lost-1", "lost-2"])
    assert lost.transaction is not None
    lost_id = lost.transaction.transactional_id
    usurper: OpenTransaction | None = None
    if fate == "aborted":
        with open_session(options.connection) as session:
            session.abort(lost.transaction)
    elif fate == "fenced":
        kafka.producer(lost_id)  # init_transactions: a new producer epoch, the open transaction aborted
    else:
        usurper = kafka.open_transaction(topic, [Sent(0, None, b"usurper")], lost_id)

    with pytest.raises(KafkaEosEpochAbortedError, match=(
        rf"{lost_id} is \w+ \(producer \d+ epoch \d+\), not the open transaction of producer {lost.transaction.producer_id} "
        rf"epoch {lost.transaction.producer_epoch}: it timed out or was fenced.*Nothing of it is visible"
    )):
        TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(0), [healthy, lost])

    assert KafkaDecisionLog(options).last(options.prefix) is None, "a decision was recorded"
    if usurper is not None:
        # The usurper's transaction is not the coordinator's to end; nothing else of the prefix is open.
        assert open_transactions(kafka, options.prefix) == [lost_id]
        usurper.abort()
    assert open_transactions(kafka, options.prefix) == []
    assert committed_values(kafka, topic) == []
    written = kafka.offsets(topic, OffsetSpec.latest(), committed=False)
    assert sum(written.values()) >= 3, f"the participants' records were written (high watermarks {written})"


def test_a_missing_decision_log_is_created_with_one_partition_and_compaction(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    log_topic = options.decision_log_topic
    assert log_topic not in kafka.admin.list_topics(timeout=10).topics

    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(0), [prepare(options, 0, ["a"])])
    assert committed_values(kafka, topic) == [b"a"]

    description = kafka.admin.describe_topics(TopicCollection([log_topic]))[log_topic].result(30)
    assert len(description.partitions) == 1
    resource = ConfigResource(ResourceType.TOPIC, log_topic)
    policy = kafka.admin.describe_configs([resource])[resource].result(30)["cleanup.policy"]
    assert policy.value == "compact"
    assert policy.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, "set on the topic, not inherited from the broker"
