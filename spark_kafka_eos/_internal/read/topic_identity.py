"""A topic is its id (KIP-516): a topic deleted and re-created under the same name gets a new one.

The end offsets a stream checkpoints carry the id of each topic they name (``"@topicIds"``), so that a re-created
topic is told from the old one whatever its offsets say: a new topic that already holds as many records as the
query's position would otherwise be read on from that position, its first records never read. An offset without
ids (a checkpoint of an earlier version) tells nothing; the next one carries them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient

from spark_kafka_eos._internal.read.data_loss import report_data_loss

TOPIC_IDS_KEY = "@topicIds"
"""Key of the topic ids in a stream offset; never a topic name (``@`` is not allowed in one)."""
UNKNOWN_ID = "AAAAAAAAAAAAAAAAAAAAAA"
"""Kafka's zero Uuid, base64: what a broker without topic ids answers."""

TopicIds = dict[str, str]


class TopicsRefused(Exception):
    """DescribeTopics answered TOPIC_AUTHORIZATION_FAILED for ``topics``: the caller names the ACLs to grant."""

    def __init__(self, topics: list[str]) -> None:
        super().__init__(f"TOPIC_AUTHORIZATION_FAILED on DescribeTopics for {', '.join(topics)}")
        self.topics = topics


def ids_in(offset: Mapping[str, Any]) -> TopicIds:
    """The topic ids a stream offset carries (empty for one written before they were)."""
    ids = offset.get(TOPIC_IDS_KEY, {})
    return {str(t): str(i) for t, i in ids.items()} if isinstance(ids, dict) else {}


def describe_topic_ids(admin: AdminClient, topics: Sequence[str], timeout_s: float) -> TopicIds:
    """Each of ``topics``' id now (DescribeTopics; base64, as Kafka's tools print it); a topic that does not exist is
    left out (its partitions' own checks decide what that means); raises TopicsRefused for those the principal may
    not describe."""
    if not topics:
        return {}
    ids, refused = {}, []
    for topic, future in admin.describe_topics(TopicCollection(list(topics)), request_timeout=timeout_s).items():
        try:
            # A second more than the request's own timeout, so that its error (a KafkaException) is what comes out.
            ids[topic] = str(future.result(timeout_s + 1).topic_id)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                refused.append(topic)
            elif exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
    if refused:
        raise TopicsRefused(sorted(refused))
    return ids


def known(ids: Mapping[str, str]) -> TopicIds:
    """``ids`` without the unknown ones."""
    return {t: i for t, i in ids.items() if i and i != UNKNOWN_ID}


def recreated(before: Mapping[str, str], now: Mapping[str, str], topics: Iterable[str] | None = None) -> list[str]:
    """The topics (of ``topics``, or all) whose id is known both ``before`` and ``now`` and differs."""
    old, new = known(before), known(now)
    wanted = set(old) & set(new) if topics is None else set(topics) & set(old) & set(new)
    return sorted(t for t in wanted if old[t] != new[t])


def report_recreated(topic: str, before: str, now: str, fail_on_data_loss: bool, where: str, instead: str) -> None:
    """``failOnDataLoss`` decides about ``topic``, whose id was ``before`` ``where`` and is ``now`` now."""
    report_data_loss(
        f"Topic {topic} was deleted and re-created: its id was {before} {where}, and is {now} now (whatever its "
        "offsets say, the query's position in the old topic means nothing in the new one).",
        fail_on_data_loss, instead,
    )
