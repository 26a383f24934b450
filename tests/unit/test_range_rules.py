"""The range reader's rules over a scripted fetcher: what each librdkafka event means for the range.

Each script is what librdkafka hands the reader, step by step; the fetcher reports positions and
watermarks as the librdkafka it stands for does (2.12.1's position moves past error events too).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError

from spark_kafka_eos._internal.client_errors import ClientCallError, ClientError, KafkaErrorCode
from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read import partition_reader
from spark_kafka_eos._internal.read.fetchers.range_fetcher import FetchError, FetchStep
from spark_kafka_eos._internal.read.partition_reader import _RangeReader
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos._internal.read.progress import FetchProgress
from spark_kafka_eos.errors import KafkaEosDataLossError, KafkaEosReadError

TOPIC = "t"


@dataclass
class Clock:
    now: float = 0.0

    def monotonic(self) -> float:
        return self.now


@dataclass
class ScriptedFetcher:
    """Steps from ``script`` (a record offset, or a FetchError); an empty step advances the clock a second.
    ``position_past_errors``: librdkafka 2.12.1's position, offset + 1 of every event (issue #4844)."""

    script: deque[int | FetchError]
    clock: Clock
    high: int | None
    """The leader's high watermark; None: the leader does not know the partition."""
    position_past_errors: bool = True
    low: int = 0
    """The leader's log start offset."""
    delivered: list[int] = field(default_factory=list)
    _position: int = 0
    reused: bool = False
    key: None = None

    def assign(self, offset: int) -> None:
        self._position = offset

    def step(self, max_records: int, timeout_s: float, end: int) -> FetchStep:
        if not self.script:
            self.clock.now += 1.0
            return FetchStep(None, False, None)
        event = self.script.popleft()
        if isinstance(event, FetchError):
            if self.position_past_errors and event.offset is not None:
                self._position = event.offset + 1
            return FetchStep(None, False, event)
        if event >= end:
            return FetchStep(None, True, None)
        self.delivered.append(event)
        self._position = event + 1
        return FetchStep(event, False, None)

    def pending(self) -> int:
        return 0

    def batches(self, flush: bool) -> list[pa.RecordBatch]:
        return []

    def position(self) -> int:
        return self._position

    def watermarks(self, timeout_s: float) -> tuple[int, int]:
        if self.high is None:
            raise ClientCallError(ClientError(KafkaErrorCode.UNKNOWN_TOPIC_OR_PART, "UNKNOWN_TOPIC_OR_PART", "Broker: Unknown topic or partition"))
        return self.low, self.high

    def close(self) -> None:
        pass


def eof(offset: int) -> FetchError:
    return FetchError(KafkaError._PARTITION_EOF, "Broker: No more messages", offset, False)


def read(fetcher: ScriptedFetcher, end: int, monkeypatch: pytest.MonkeyPatch, fail_on_data_loss: bool = True) -> list[int]:
    monkeypatch.setattr(partition_reader.time, "monotonic", fetcher.clock.monotonic)
    # A range that stalls replaces its consumer once: the new one goes on with the same script.
    monkeypatch.setattr(partition_reader, "open_fetcher", lambda *_, **__: fetcher)
    options = parse_reader_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": TOPIC,
                                    "failOnDataLoss": str(fail_on_data_loss).lower(),
                                    "kafkaConsumer.pollTimeoutMs": "600000"}, streaming=False)
    reader = _RangeReader(options, OffsetRange(TOPIC, 0, 0, end), fetcher, FetchProgress(TOPIC, 0))  # type: ignore[arg-type]
    list(reader.batches())
    return fetcher.delivered


def test_an_eof_one_short_of_the_range_end_does_not_end_the_range_when_the_position_moved_past_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower (or a new leader) reports the end at 4 while the range ends at 5: 2.12.1's position says 5
    after the EOF event. The last record, fetched once the broker has it, is read, not skipped."""
    clock = Clock()
    fetcher = ScriptedFetcher(deque([0, 1, 2, 3, eof(4), 4]), clock, high=5)
    assert read(fetcher, 5, monkeypatch) == [0, 1, 2, 3, 4]


def test_a_partition_reported_unknown_for_a_moment_is_read_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """librdkafka reports _UNKNOWN_PARTITION while its metadata is stale (partitions just added) and keeps
    fetching: the leader knows the partition, so nothing is skipped."""
    clock = Clock()
    unknown = FetchError(KafkaError._UNKNOWN_PARTITION, "Local: Unknown partition", None, False)
    fetcher = ScriptedFetcher(deque([unknown, 0, 1, 2]), clock, high=3)
    assert read(fetcher, 3, monkeypatch) == [0, 1, 2]


def test_a_partition_its_leader_does_not_know_for_the_confirmation_time_is_lost_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    unknown = FetchError(KafkaError._UNKNOWN_PARTITION, "Local: Unknown partition", None, False)
    fetcher = ScriptedFetcher(deque([0, unknown]), clock, high=None)
    with pytest.raises(KafkaEosDataLossError, match=r"t-0 \[0, 3\): the topic or partition is gone .* at offset 1"):
        read(fetcher, 3, monkeypatch)
    assert clock.now >= partition_reader.CONFIRM_S


def test_a_log_that_ends_before_the_range_for_the_confirmation_time_is_a_data_loss_not_a_stall(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A topic re-created shorter under a checkpoint: the range's end is past the log's. Spark reports data loss."""
    clock = Clock()
    fetcher = ScriptedFetcher(deque([0, 1, eof(2)]), clock, high=2)
    with pytest.raises(KafkaEosDataLossError, match=r"Offsets 2 to 4 of t-0 \[0, 5\) do not exist"):
        read(fetcher, 5, monkeypatch)
    fetcher = ScriptedFetcher(deque([0, 1, eof(2)]), Clock(), high=2)
    assert read(fetcher, 5, monkeypatch, fail_on_data_loss=False) == [0, 1]


def test_a_batch_librdkafka_cannot_decode_fails_the_read(monkeypatch: pytest.MonkeyPatch) -> None:
    corrupt = FetchError(KafkaError._BAD_MSG, "Message at offset 1 failed CRC32C check", 1, False)
    fetcher = ScriptedFetcher(deque([0, corrupt, 3]), Clock(), high=4)
    with pytest.raises(KafkaEosReadError, match=r"Reading t-0 \[0, 4\) failed at offset 1: librdkafka cannot decode"):
        read(fetcher, 4, monkeypatch)


def out_of_range(offset: int) -> FetchError:
    return FetchError(KafkaError.OFFSET_OUT_OF_RANGE, "Broker: Offset out of range", offset, False)


def test_an_offset_out_of_range_inside_the_leader_s_log_is_asked_again_not_reported_deleted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica behind the leader (a follower read with client.rack, a new leader catching up) answers
    OFFSET_OUT_OF_RANGE for an offset the leader's log holds: nothing was deleted, and nothing is skipped."""
    fetcher = ScriptedFetcher(deque([0, 1, out_of_range(2), 2, 3, 4]), Clock(), high=5)
    assert read(fetcher, 5, monkeypatch) == [0, 1, 2, 3, 4]


def test_offsets_deleted_below_the_position_are_named_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    fetcher = ScriptedFetcher(deque([0, 1, out_of_range(2)]), Clock(), high=8, low=5)
    with pytest.raises(KafkaEosDataLossError, match=r"the earliest available offset is 5, so offsets 2 to 4 were deleted"):
        read(fetcher, 8, monkeypatch)
    fetcher = ScriptedFetcher(deque([0, 1, out_of_range(2), 5, 6, 7]), Clock(), high=8, low=5)
    assert read(fetcher, 8, monkeypatch, fail_on_data_loss=False) == [0, 1, 5, 6, 7]


def test_an_undecodable_batch_just_past_the_range_leaves_the_complete_range_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    """Records 0-4, a marker at 5, then a corrupt batch at 6: the range [0, 6) is complete (issue 49 item 4); a range
    that holds offset 6 still fails on it."""
    corrupt = FetchError(KafkaError._BAD_MSG, "MessageSet at offset 6 failed CRC32C check", 6, False)
    fetcher = ScriptedFetcher(deque([0, 1, 2, 3, 4, corrupt]), Clock(), high=8, position_past_errors=False)
    assert read(fetcher, 6, monkeypatch) == [0, 1, 2, 3, 4]
    fetcher = ScriptedFetcher(deque([0, 1, 2, 3, 4, corrupt]), Clock(), high=8, position_past_errors=False)
    with pytest.raises(KafkaEosReadError, match=r"t-0 \[0, 7\) failed at offset 6: librdkafka cannot decode"):
        read(fetcher, 7, monkeypatch)
