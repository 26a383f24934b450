"""The stream reader of Spark 4.0 and 4.1, driven as their engine drives it (the call orders were
recorded from pyspark 4.1.4): ``latestOffset()`` without a start, ``initialOffset()`` after it on a new
query, ``partitions(end, end)`` for setLatestSeenOffset on a restart. End-to-end runs on those
Sparks are in test_spark_versions.py."""

from __future__ import annotations

import uuid

import pytest

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.legacy_stream_reader import KafkaEosLegacyStreamReader
from spark_kafka_eos._internal.read.planner import ranges_of
from spark_kafka_eos._internal.read.reader import ORIGIN_KEY, from_stream_offset
from spark_kafka_eos.errors import KafkaEosOptionError
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import group_offsets
from tests.harness.stream import positions

pytestmark = [pytest.mark.kafka]


def legacy_reader(kafka: KafkaTestCluster, **options: str) -> KafkaEosLegacyStreamReader:
    raw = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "startingoffsets": "earliest", **{k.lower(): v for k, v in options.items()}}
    return KafkaEosLegacyStreamReader(parse_reader_options(raw, streaming=True))


def ranges(reader: KafkaEosLegacyStreamReader, start: dict, end: dict) -> list[tuple[int, int, int]]:
    return [(r.partition, r.start, r.end) for planned in reader.partitions(start, end) for r in ranges_of(planned)]  # type: ignore[arg-type]


def test_each_batch_starts_where_the_engine_last_planned_and_a_restart_where_the_checkpoint_ends(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(2)
    kafka.produce_plain(topic, [Sent(p, None, b"x") for p in (0, 1) for _ in range(5)])
    reader = legacy_reader(kafka, subscribe=topic)
    first_end = reader.latestOffset()  # a new query: asked before initialOffset()
    start = reader.initialOffset()
    assert positions(start) == {topic: {"0": 0, "1": 0}}
    assert positions(first_end) == {topic: {"0": 5, "1": 5}, ORIGIN_KEY: positions(start)}
    assert ranges(reader, start, first_end) == [(0, 0, 5), (1, 0, 5)]
    assert reader.latestOffset() == first_end  # nothing new: the same end, so the engine plans no batch
    kafka.produce_plain(topic, [Sent(0, None, b"y")] * 3)
    second_end = reader.latestOffset()
    assert positions(second_end) == {topic: {"0": 8, "1": 5}}
    assert ranges(reader, first_end, second_end) == [(0, 5, 8)]

    restarted = legacy_reader(kafka, subscribe=topic)
    assert restarted.partitions(second_end, second_end) == []  # setLatestSeenOffset: a position, not a batch
    kafka.produce_plain(topic, [Sent(1, None, b"z")])
    assert positions(restarted.latestOffset()) == {topic: {"0": 8, "1": 6}}


def test_an_available_now_restart_through_spark_s_wrapper_reads_on_from_the_checkpoint_not_from_the_origin(
        kafka: KafkaTestCluster) -> None:
    """With spark.sql.streaming.triggerAvailableNowWrapper.enabled, a restart of Spark 4.0/4.1 asks for the
    run's target (``latestOffset()``) before anything else, then replays the interrupted first batch from
    ``initialOffset()``, then plans from that batch's end to the target (call order recorded from pyspark
    4.0.5). The target carries an origin; the batch after the replay must not read from it again."""
    topic = kafka.create_topic(2)
    kafka.produce_plain(topic, [Sent(p, None, b"x") for p in (0, 1) for _ in range(5)])
    first_run = legacy_reader(kafka, subscribe=topic)
    first_end = first_run.latestOffset()
    assert ranges(first_run, first_run.initialOffset(), first_end) == [(0, 0, 5), (1, 0, 5)]  # then the driver died
    kafka.produce_plain(topic, [Sent(p, None, b"y") for p in (0, 1) for _ in range(3)])

    restarted = legacy_reader(kafka, subscribe=topic)
    target = restarted.latestOffset()  # the wrapper's prepareForTriggerAvailableNow
    assert from_stream_offset(target) == {(topic, 0): 8, (topic, 1): 8}
    assert restarted.partitions(first_end, first_end) == []  # setLatestSeenOffset
    assert ranges(restarted, restarted.initialOffset(), first_end) == [(0, 0, 5), (1, 0, 5)]  # the replay
    assert ranges(restarted, first_end, target) == [(0, 5, 8), (1, 5, 8)]  # on from the replayed end, not from 0


def test_a_restart_s_first_question_does_not_move_the_progress_group_back_to_the_initial_offset(kafka: KafkaTestCluster) -> None:
    topic, group = kafka.create_topic(1), f"progress-{uuid.uuid4().hex[:8]}"
    kafka.produce_plain(topic, [Sent(0, None, b"x")] * 5)
    first_run = legacy_reader(kafka, subscribe=topic, progressGroup=group)
    first_end = first_run.latestOffset()
    ranges(first_run, first_run.initialOffset(), first_end)
    kafka.produce_plain(topic, [Sent(0, None, b"y")] * 2)
    first_run.latestOffset()  # plans the next batch: the stream stands at 5
    assert group_offsets(kafka, group, topic, 1) == {0: 5}

    restarted = legacy_reader(kafka, subscribe=topic, progressGroup=group)
    restarted.latestOffset()  # asked before the checkpoint's position is known (the AvailableNow wrapper)
    assert group_offsets(kafka, group, topic, 1) == {0: 5}  # not 0, the initial offset


def test_the_first_trigger_never_waits_for_min_offsets_and_later_ones_do(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, b"x")] * 4)
    reader = legacy_reader(kafka, subscribe=topic, minOffsetsPerTrigger="10", maxTriggerDelay="1h")
    end = reader.latestOffset()  # the only trigger of a Trigger.AvailableNow run: reads what is there
    assert end[topic] == {"0": 4}
    reader.partitions(reader.initialOffset(), end)
    kafka.produce_plain(topic, [Sent(0, None, b"y")] * 4)
    assert reader.latestOffset() == end  # 4 < 10 and the delay has not passed: no batch yet


def test_max_offsets_per_trigger_is_refused_naming_the_spark_that_has_it(kafka: KafkaTestCluster) -> None:
    with pytest.raises(KafkaEosOptionError, match=r"Option 'maxOffsetsPerTrigger': needs Spark 4.2 or later; this is Spark .*AvailableNow"):
        legacy_reader(kafka, subscribe="t", maxOffsetsPerTrigger="10")
