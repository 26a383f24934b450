"""Read one planned offset range with a read_committed consumer, as Arrow record batches.

librdkafka drops aborted records and transaction markers using the aborted-transaction list of
each fetch. A range ``[start, end)`` is done when the consumer is past ``end - 1``, never when a
record with offset ``end - 1`` arrives, because the last offsets of a range are often markers or
aborted records. librdkafka's ``position()`` only moves past records it delivers, so "past" is
known from the first of: a delivered record at or beyond ``end``, ``position() >= end``, or a
partition-EOF event at or beyond ``end``. The EOF event matters when the range ends at the last
stable offset right after aborted records: no later record can be fetched until the open
transaction at the LSO is decided, and the position alone would wait for it.

A read that stops moving fails after ``kafkaConsumer.pollTimeoutMs`` (see ``read/progress.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_kafka_eos.errors import KafkaEosOptionError, KafkaEosReadError
from spark_kafka_eos.librdkafka_config import for_librdkafka
from spark_kafka_eos.read.authorization import topic_authorization_error
from spark_kafka_eos.read.data_loss import moved_back_problem, report_data_loss
from spark_kafka_eos.read.planner import OffsetRange
from spark_kafka_eos.read.progress import FetchProgress, StallWatch, statistics_interval_ms
from spark_kafka_eos.read.reader_options import ReaderOptions
from spark_kafka_eos.read.record_batch import RecordBatchBuilder

log = logging.getLogger(__name__)

_OUT_OF_RANGE = {KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE}
_VANISHED = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}
_MAX_MESSAGES_PER_POLL = 10_000
_POLL_TIMEOUT_S = 0.05


def read_offset_range(options: ReaderOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The committed records of ``offset_range`` (read_committed by default), in offset order."""
    if offset_range.size <= 0:
        return
    fetch_progress = FetchProgress(offset_range.topic, offset_range.partition)
    consumer = open_consumer(options, fetch_progress.on_statistics, statistics_interval_ms(options.poll_timeout_ms))
    try:
        yield from _RangeReader(options, offset_range, consumer, fetch_progress).batches()
    finally:
        consumer.close()


def open_consumer(
    options: ReaderOptions, on_statistics: Callable[[str], None] | None = None, statistics_interval_ms: int = 0
) -> Consumer:
    """A consumer with the read's configuration; an option error if librdkafka rejects it."""
    config = options.consumer_config()
    if on_statistics is not None:
        config.update({"statistics.interval.ms": statistics_interval_ms, "stats_cb": on_statistics})
    try:
        return Consumer(for_librdkafka(config))
    except KafkaException as err:
        raise KafkaEosOptionError(
            "kafka.*", f"librdkafka rejected the consumer configuration: {err.args[0].str()}.", "fix or remove that kafka.* option."
        ) from None


def check_consumer_config(options: ReaderOptions) -> None:
    """Fail on the driver, before any task runs, if librdkafka rejects the configuration."""
    open_consumer(options).close()


class _RangeReader:
    def __init__(self, options: ReaderOptions, offset_range: OffsetRange, consumer: Consumer, fetch_progress: FetchProgress) -> None:
        self._options = options
        self._range = offset_range
        self._consumer = consumer
        self._fetch_progress = fetch_progress
        self._tp = KafkaTopicPartition(offset_range.topic, offset_range.partition)
        self._position = offset_range.start
        self._group_refused = False
        self._builder = RecordBatchBuilder(
            offset_range.topic, offset_range.partition, options.include_headers,
            options.max_records_per_batch, options.max_bytes_per_batch,
        )

    @property
    def _name(self) -> str:
        r = self._range
        return f"{r.topic}-{r.partition} [{r.start}, {r.end})"

    def batches(self) -> Iterator[pa.RecordBatch]:
        end = self._range.end
        self._consumer.assign([KafkaTopicPartition(self._range.topic, self._range.partition, self._range.start)])
        per_poll = min(self._options.max_records_per_batch, _MAX_MESSAGES_PER_POLL)
        watch = StallWatch(self._options.poll_timeout_ms / 1000.0, time.monotonic())
        while self._position < end:
            # Ask for no more than the range holds: consume() waits for the whole count (or the
            # timeout), and markers or aborted records in the range make it return fewer.
            for message in self._consumer.consume(min(per_poll, end - self._position), _POLL_TIMEOUT_S):
                if message.error():
                    self._on_error(message)
                    continue
                offset = message.offset()
                assert offset is not None  # a fetched record always has one
                if offset >= end:
                    self._position = end
                    break
                self._builder.add(message, offset)
                self._position = offset + 1
                if self._builder.full():
                    yield self._builder.build()
            if self._position < end:
                # Markers and aborted records are not returned, but they move the position.
                consumer_position = self._consumer.position([self._tp])[0].offset
                self._position = max(self._position, consumer_position)
            if self._position < end and watch.stalled(self._position, self._fetch_progress.next_offset, time.monotonic()):
                raise KafkaEosReadError(
                    f"Reading {self._name} made no progress at offset {self._position} for "
                    f"{watch.limit_s:g}s (kafkaConsumer.pollTimeoutMs). Check that the brokers at "
                    f"{self._options.bootstrap_servers} are reachable from the executors."
                )
        if len(self._builder):
            yield self._builder.build()

    def _on_error(self, message: Message) -> None:
        error = message.error()
        assert error is not None  # called for error events only
        code = error.code()
        if code == KafkaError._PARTITION_EOF:
            # Everything below the EOF offset was fetched, and delivered before this event.
            self._position = max(self._position, message.offset() or 0)
        elif code in _OUT_OF_RANGE:
            self._skip_lost_offsets(error)
        elif code in _VANISHED:
            self._on_vanished(error)
        elif code == KafkaError.GROUP_AUTHORIZATION_FAILED:
            # librdkafka looks up the coordinator of the consumer's group, which this reader never
            # uses (explicit offsets, no commits); like Spark's assign-only consumer, read on.
            if not self._group_refused:
                log.warning("Reading %s: %s; the source uses no consumer group, so this is ignored.", self._name, error.str())
            self._group_refused = True
        elif code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise topic_authorization_error(self._options, [self._range.topic], f"{error.str()} while reading {self._name}")
        elif code > 0 or error.fatal():
            raise KafkaEosReadError(f"Reading {self._name} failed at offset {self._position}: {error.str()}")
        else:
            # Local, transient conditions (broker down, transport): librdkafka retries; the
            # stall limit turns a lasting one into an error.
            log.info("Reading %s: %s", self._name, error.str())

    def _skip_lost_offsets(self, error: KafkaError) -> None:
        low, high = self._consumer.get_watermark_offsets(self._tp, timeout=self._options.request_timeout_s)
        tp = (self._range.topic, self._range.partition)
        if self._position >= high:
            # The log now ends below the position: re-created topic or truncated log. Nothing of
            # the rest of this range exists; the next micro-batch plans from the new offsets.
            report_data_loss(
                moved_back_problem(tp, self._position, high) + f" Reading {self._name} failed: {error.str()}.",
                self._options.fail_on_data_loss, f"Skipping the rest of {self._name}",
            )
            self._position = self._range.end
            return
        report_data_loss(
            f"{self._name}: offset {self._position} no longer exists ({error.str()}); the earliest available "
            f"offset is {low}, so offsets {self._position} to {low - 1} were deleted (retention or deleteRecords) "
            "before they were read.",
            self._options.fail_on_data_loss, f"Skipping them and reading on from offset {low}",
        )
        self._position = max(self._position, low)
        if self._position < self._range.end:
            # After an offset-reset error the partition's fetcher is stopped and seek() refuses
            # ("erroneous state"); a fresh assignment restarts it.
            self._consumer.assign([KafkaTopicPartition(self._range.topic, self._range.partition, self._position)])

    def _on_vanished(self, error: KafkaError) -> None:
        report_data_loss(
            f"{self._name}: the topic or partition is gone ({error.str()}) at offset {self._position}.",
            self._options.fail_on_data_loss, "Skipping what is left of the range",
        )
        self._position = self._range.end
