"""The range rules over a fetcher that replays what librdkafka hands out (pure logic, no broker).

librdkafka moves its consume position past every message a fetch returns, at once. A step stops at an
error event and keeps the rest of that fetch pending, so the reader must not take the position as
progress while messages are pending: it would skip them.
"""

from __future__ import annotations

from collections import deque

import pyarrow as pa
from confluent_kafka import KafkaError

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.fetchers.range_fetcher import FetchError, FetchStep
from spark_kafka_eos._internal.read.partition_reader import _RangeReader
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos._internal.read.progress import FetchProgress

Delivery = int | FetchError


class ReplayFetcher:
    """Hands out ``fetches`` one per empty queue; the position moves past each fetch as it is handed out."""

    def __init__(self, fetches: list[list[Delivery]]) -> None:
        self._fetches = deque(fetches)
        self._pending: deque[Delivery] = deque()
        self._taken: list[int] = []
        self._position = 0
        self.reused = False
        self.key = None

    def assign(self, offset: int) -> None:
        self._position = offset

    def step(self, max_records: int, timeout_s: float, end: int) -> FetchStep:
        if not self._pending and self._fetches:
            fetch = self._fetches.popleft()
            self._pending.extend(fetch)
            self._position = max([self._position] + [d + 1 for d in fetch if isinstance(d, int)])
        last = None
        while self._pending:
            delivery = self._pending.popleft()
            if isinstance(delivery, FetchError):
                return FetchStep(last, False, delivery)
            if delivery >= end:
                self._pending.clear()
                return FetchStep(last, True, None)
            self._taken.append(delivery)
            last = delivery
        return FetchStep(last, False, None)

    def pending(self) -> int:
        return len(self._pending)

    def batches(self, flush: bool) -> list[pa.RecordBatch]:
        taken, self._taken = self._taken, []
        return [pa.RecordBatch.from_pydict({"offset": pa.array(taken, pa.int64())})] if taken else []

    def position(self) -> int:
        return self._position

    def watermarks(self, timeout_s: float) -> tuple[int, int]:
        return 0, self._position

    def close(self) -> None:
        pass


def read(fetches: list[list[Delivery]], end: int) -> list[int]:
    options = parse_reader_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}, streaming=False)
    reader = _RangeReader(options, OffsetRange("t", 0, 0, end), ReplayFetcher(fetches), FetchProgress("t", 0))
    return [offset for batch in reader.batches() for offset in batch.column("offset").to_pylist()]


def test_records_behind_an_error_event_in_the_same_fetch_are_read() -> None:
    transport = FetchError(KafkaError._TRANSPORT, "Disconnected", None, False)
    assert read([[0, 1, 2, 3, 4, transport, 5, 6]], end=7) == [0, 1, 2, 3, 4, 5, 6]


def test_an_eof_event_between_records_ends_nothing_early() -> None:
    eof = FetchError(KafkaError._PARTITION_EOF, "EOF", 3, False)
    assert read([[0, 1, 2, eof, 3], [4]], end=5) == [0, 1, 2, 3, 4]

