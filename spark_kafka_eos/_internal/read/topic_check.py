"""A task's check that the topics it reads are still the ones its micro-batch was planned over (their ids).

librdkafka fetches by topic id, and when the metadata brings a topic's new id it adopts it and fetches on at the old
position: a task reading a topic re-created under it would read the new topic's records at the old range's offsets,
with no error, and the next micro-batch would read them again from the new topic's start. So a task asks for its
topics' ids before it reads (a re-created topic's ranges are read not at all) and once it has read (a topic
re-created meanwhile fails the task, whose records are then not used, whatever ``failOnDataLoss`` says).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from confluent_kafka import KafkaException

from spark_kafka_eos._internal.cluster import admin_client
from spark_kafka_eos._internal.config.reader import ReaderOptions
from spark_kafka_eos._internal.read.authorization import topic_authorization_error
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos._internal.read.topic_identity import (
    TopicIds,
    TopicsRefused,
    describe_topic_ids,
    recreated,
    report_recreated,
)
from spark_kafka_eos._internal.retry import LOOKUP_RETRIABLE, REQUEST_TIMEOUT_S, Backoff, Deadline, retry
from spark_kafka_eos.errors import KafkaEosDataLossError

log = logging.getLogger(__name__)


def _unanswered(err: BaseException) -> bool:
    """A look-up the cluster did not answer (unreachable, a connection reset, a leader moving): ask again."""
    return LOOKUP_RETRIABLE(err) or isinstance(err, TimeoutError)


STALL_CHECK_TIMEOUT_S = 1.0
"""How long a stalled range waits for its topic's id: short, as the check repeats at every stall."""


def planned_ids(ranges: Sequence[OffsetRange]) -> TopicIds:
    """The topic ids the ranges were planned with (a batch read's ranges carry none)."""
    return {r.topic: r.topic_id for r in ranges if r.topic_id is not None}


def current_ids(options: ReaderOptions, topics: Sequence[str], patient: bool = True) -> TopicIds:
    """Each topic's id now, from this process's kept admin client. ``patient``: asked again while the cluster cannot
    be reached, for as long as a read may stall (``kafkaConsumer.pollTimeoutMs``), so that a network blip never fails
    the task; else asked once, briefly (:data:`STALL_CHECK_TIMEOUT_S`)."""
    admin = admin_client(options.connection)

    def attempt(deadline: Deadline) -> TopicIds:
        return describe_topic_ids(admin, topics, min(REQUEST_TIMEOUT_S, deadline.left(1.0)))

    try:
        if not patient:
            return describe_topic_ids(admin, topics, STALL_CHECK_TIMEOUT_S)
        return retry(attempt, Deadline(options.poll_timeout_ms / 1000.0), _unanswered, Backoff(0.1, 1.0),
                     on_retry=lambda err, wait: log.info("Asking for the ids of %s again in %.1fs: %r", topics, wait, err))
    except TopicsRefused as refused:
        raise topic_authorization_error(options, refused.topics, str(refused)) from None


def ranges_still_planned(options: ReaderOptions, ranges: Sequence[OffsetRange]) -> list[OffsetRange]:
    """``ranges`` but those of a topic re-created since they were planned (``failOnDataLoss`` decides)."""
    planned = planned_ids(ranges)
    if not planned:
        return list(ranges)
    now = current_ids(options, sorted(planned))
    renewed = recreated(planned, now)
    for topic in renewed:
        report_recreated(topic, planned[topic], now[topic], options.fail_on_data_loss, "when this micro-batch was planned",
                         "Reading nothing of it in this task; the next micro-batch reads the new topic from its earliest "
                         "offsets")
    return [r for r in ranges if r.topic not in renewed]


def check_still_planned(options: ReaderOptions, ranges: Sequence[OffsetRange], patient: bool = True) -> None:
    """Raise if a topic of ``ranges`` was re-created while the task read it: what it read may be the new topic's."""
    planned = planned_ids(ranges)
    if not planned:
        return
    now = current_ids(options, sorted(planned), patient)
    renewed = recreated(planned, now)
    if renewed:
        topic = renewed[0]
        raise KafkaEosDataLossError(
            f"Topic {topic} was deleted and re-created while this task read it: its id was {planned[topic]} when the "
            f"micro-batch was planned, and is {now[topic]} now, so records read at the planned offsets may be the new "
            "topic's. The task fails so that none of them is used; the micro-batch's next attempt or the query's restart "
            "reads nothing of the old topic's ranges and the next micro-batch reads the new topic from its earliest "
            "offsets (under failOnDataLoss=false; true fails there, naming both ids)."
        )


def check_at_stall(options: ReaderOptions, stalled: OffsetRange) -> None:
    """:func:`check_still_planned` for a range that made no progress at all: a topic re-created under it starts at
    leader epoch 0, below the one its consumer knows, and librdkafka ignores the new topic's metadata as stale, so the
    range would wait out kafkaConsumer.pollTimeoutMs. A look-up that fails tells nothing here (a broker down stalls
    reads too): the stall watch still bounds the read."""
    try:
        check_still_planned(options, [stalled], patient=False)
    except (KafkaException, TimeoutError) as err:  # TimeoutError: the answer's future, waited for in vain
        log.debug("Could not ask for the id of topic %s at a stall (%r)", stalled.topic, err)
