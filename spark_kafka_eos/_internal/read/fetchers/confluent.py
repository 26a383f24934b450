"""The pure-Python :class:`~spark_kafka_eos._internal.read.fetchers.range_fetcher.RangeFetcher`: confluent-kafka's
consumer and a Python record batch builder. It is the path wherever the compiled one is missing."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_kafka_eos._internal.client_errors import KafkaErrorCode, raised_as_client_call_error
from spark_kafka_eos._internal.read.fetchers.range_fetcher import FetchError, FetchStep
from spark_kafka_eos._internal.read.idle_consumers import IDLE_CONSUMERS, consumer_key
from spark_kafka_eos._internal.read.record_batch import RecordBatchBuilder

_DRAIN_BATCH = 1000
_TOPIC_LOOKUP_TIMEOUT_S = 5.0

log = logging.getLogger(__name__)


class StatisticsRoute:
    """A consumer's ``stats_cb`` that hands librdkafka's statistics to the reader of its current range."""

    def __init__(self) -> None:
        self.target: Callable[[str], None] | None = None

    def __call__(self, statistics: str) -> None:
        if self.target is not None:
            self.target(statistics)


@dataclass
class KeptConsumer:
    """A consumer and what lives as long as it: its statistics route and the topics it has looked up."""

    consumer: Consumer
    route: StatisticsRoute
    known_topics: set[str] = field(default_factory=set)

    def know_topic(self, topic: str) -> None:
        """Look ``topic`` up once. A partition assigned in a topic the client has no metadata for waits for
        librdkafka's once-a-second topic scan before its first fetch (0.7-1.0 s on a fresh consumer); a
        metadata request first fills librdkafka's cache, which the assignment then finds."""
        if topic in self.known_topics:
            return
        try:
            self.consumer.list_topics(topic, timeout=_TOPIC_LOOKUP_TIMEOUT_S)
        except KafkaException as err:  # only a head start: the assignment finds its leader either way
            log.debug("Looking up topic %r before reading it failed: %s", topic, err)
            return
        self.known_topics.add(topic)


def open_confluent_fetcher(
    config: Mapping[str, Any], topic: str, partition: int, builder: RecordBatchBuilder, on_statistics: Callable[[str], None],
    make_consumer: Callable[[dict[str, Any]], Consumer], fresh: bool = False,
) -> ConfluentFetcher:
    """A fetcher of ``topic``-``partition`` on an idle consumer of ``config`` (unless ``fresh``), or on a new one
    (``make_consumer``)."""
    key = consumer_key("python", config)
    kept = None if fresh else IDLE_CONSUMERS.take(key)
    reused = kept is not None
    if kept is None:
        route = StatisticsRoute()
        kept = KeptConsumer(make_consumer({**config, "stats_cb": route}), route)
    kept.route.target = on_statistics
    return ConfluentFetcher(kept, topic, partition, builder, key, reused)


class ConfluentFetcher:
    """Reads one partition with ``consumer``, into ``builder``'s batches."""

    def __init__(
        self, kept: KeptConsumer, topic: str, partition: int, builder: RecordBatchBuilder, key: Hashable | None = None,
        reused: bool = False,
    ) -> None:
        self._kept = kept
        self._consumer = kept.consumer
        self._topic, self._partition = topic, partition
        self._builder = builder
        self._full: list[pa.RecordBatch] = []
        self._pending: deque[Message] = deque()
        self._key = key
        self.key = key
        self.reused = reused

    def assign(self, offset: int) -> None:
        self._kept.know_topic(self._topic)
        with raised_as_client_call_error(KafkaException):
            self._consumer.assign([KafkaTopicPartition(self._topic, self._partition, offset)])

    def step(self, max_records: int, timeout_s: float, end: int) -> FetchStep:
        if not self._pending:
            self._pending.extend(self._consumer.consume(max_records, timeout_s))
        last_offset = None
        while self._pending:
            message = self._pending.popleft()
            error = message.error()
            if error is not None:
                return FetchStep(last_offset, False, _fetch_error(error, message))
            offset = message.offset()
            assert offset is not None  # a fetched record always has one
            if offset >= end:
                self._pending.clear()
                return FetchStep(last_offset, True, None)
            self._builder.add(message, offset)
            last_offset = offset
            if self._builder.full():
                self._full.append(self._builder.build())
        return FetchStep(last_offset, False, None)

    def pending(self) -> int:
        return len(self._pending)

    def batches(self, flush: bool) -> list[pa.RecordBatch]:
        if flush and len(self._builder):
            self._full.append(self._builder.build())
        full, self._full = self._full, []
        return full

    def position(self) -> int:
        with raised_as_client_call_error(KafkaException):
            offset: int = self._consumer.position([KafkaTopicPartition(self._topic, self._partition)])[0].offset
        return offset

    def watermarks(self, timeout_s: float) -> tuple[int, int]:
        with raised_as_client_call_error(KafkaException):
            low, high = self._consumer.get_watermark_offsets(KafkaTopicPartition(self._topic, self._partition), timeout=timeout_s)
        return low, high

    def close(self) -> None:
        self._pending.clear()
        self._consumer.close()

    def release(self) -> None:
        if self._key is None:
            self.close()
            return
        self._pending.clear()
        self._kept.route.target = None
        try:
            self._consumer.unassign()
            # Events of the old assignment already queued: librdkafka drops later ones by their version.
            while self._consumer.consume(_DRAIN_BATCH, 0):
                pass
        except KafkaException:
            self._consumer.close()
            return
        IDLE_CONSUMERS.keep(self._key, self._kept, lambda kept: kept.consumer.close())


def _fetch_error(error: KafkaError, message: Message) -> FetchError:
    # confluent-kafka marks a consumed error event fatal=False even for _FATAL.
    return FetchError(error.code(), error.str(), message.offset(), error.fatal() or error.code() == KafkaErrorCode.FATAL)
