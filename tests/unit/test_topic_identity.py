"""A topic is its id: the offsets' ids, what counts as re-created, and readers of offsets that skip them."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read import topic_check
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos._internal.read.reader import from_stream_offset, to_stream_offset
from spark_kafka_eos._internal.read.topic_identity import TOPIC_IDS_KEY, UNKNOWN_ID, ids_in, recreated
from spark_kafka_eos._internal.write.epoch_input import _kafka_offsets


def test_an_offset_carries_the_ids_of_the_topics_it_names_and_reads_back_without_them() -> None:
    offset = to_stream_offset({("a", 0): 5, ("b", 1): 7}, {"a": "id-a", "b": "id-b", "c": "id-c"})
    assert offset[TOPIC_IDS_KEY] == {"a": "id-a", "b": "id-b"}
    assert from_stream_offset(offset) == {("a", 0): 5, ("b", 1): 7}
    assert TOPIC_IDS_KEY not in to_stream_offset({("a", 0): 5})


def test_only_a_known_id_that_changed_is_a_re_creation() -> None:
    assert recreated({"a": "x", "b": "y"}, {"a": "z", "b": "y"}) == ["a"]
    assert recreated({}, {"a": "z"}) == []  # an offset written before ids were recorded
    assert recreated({"a": UNKNOWN_ID}, {"a": "z"}) == []  # a broker without topic ids
    assert recreated({"a": "x"}, {}) == []  # deleted: the partitions' own checks decide
    assert recreated({"a": "x", "b": "y"}, {"a": "z", "b": "w"}, topics={"b"}) == ["b"]
    assert ids_in({"a": {"0": 1}}) == {}


def test_the_sinks_offset_log_reader_skips_the_ids() -> None:
    line = '{"a":{"0":5},"@topicIds":{"a":"id-a"}}'
    assert _kafka_offsets(line) == ({("a", 0): 5}, {})


class _Admin:
    """An admin client whose DescribeTopics answers ``answer`` (a future that may never complete)."""

    def __init__(self, answer: Future[object]) -> None:
        self.answer = answer

    def describe_topics(self, topics: TopicCollection, request_timeout: float) -> dict[str, Future[object]]:
        return dict.fromkeys(topics.topic_names, self.answer)


@pytest.mark.parametrize("outcome", ["no answer in time", "transport error"])
def test_a_stalled_range_whose_id_look_up_fails_reads_on(outcome: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker that is down stalls the range and answers no DescribeTopics either: the stall's id check tells nothing
    then, and must not fail the task (the read's own stall watch bounds it)."""
    answer: Future[object] = Future()
    if outcome == "transport error":
        answer.set_exception(KafkaException(KafkaError(KafkaError._TRANSPORT)))
    monkeypatch.setattr(topic_check, "admin_client", lambda connection: _Admin(answer))
    monkeypatch.setattr(topic_check, "STALL_CHECK_TIMEOUT_S", 0.05)
    options = parse_reader_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "a"}, streaming=True)
    topic_check.check_at_stall(options, OffsetRange("a", 0, 0, 10, "id-a"))


class _FlakyAdmin:
    """DescribeTopics that fails with a broken connection ``failures`` times (a network blip), then answers."""

    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0

    def describe_topics(self, topics: TopicCollection, request_timeout: float) -> dict[str, Future[object]]:
        self.calls += 1
        answer: Future[object] = Future()
        if self.calls <= self.failures:
            answer.set_exception(KafkaException(KafkaError(KafkaError._TRANSPORT)))
        else:
            answer.set_result(SimpleNamespace(topic_id="id-a"))
        return dict.fromkeys(topics.topic_names, answer)


def test_a_tasks_id_check_rides_out_a_network_blip(monkeypatch: pytest.MonkeyPatch) -> None:
    """The task's checks before and after it reads ask again while the cluster cannot be reached (up to
    kafkaConsumer.pollTimeoutMs): a 10 s outage failed every attempt of the task at once, and stopped the stream."""
    admin = _FlakyAdmin(failures=3)
    monkeypatch.setattr(topic_check, "admin_client", lambda connection: admin)
    options = parse_reader_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "a"}, streaming=True)
    topic_check.check_still_planned(options, [OffsetRange("a", 0, 0, 10, "id-a")])
    assert admin.calls == 4, "the blip did not fire"
