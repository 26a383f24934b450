"""Read one planned offset range with a read_committed consumer, as Arrow record batches.

librdkafka drops aborted records and transaction markers using the aborted-transaction list of
each fetch. A range ``[start, end)`` is done when the consumer is past ``end - 1``, never when a
record with offset ``end - 1`` arrives, because the last offsets of a range are often markers or
aborted records. librdkafka's ``position()`` only moves past records it delivers, so "past" is
known from the first of: a delivered record at or beyond ``end``, ``position() >= end``, or a
partition-EOF event at or beyond ``end``. The EOF event matters when the range ends at the last
stable offset right after aborted records: no later record can be fetched until the open
transaction at the LSO is decided, and the position alone would wait for it.

The position librdkafka reports is never taken past the offset of the last partition-EOF event when no
record was delivered since: librdkafka before 2.13.2 (the compiled path's was 2.12) moves it to offset + 1 of every event,
the EOF event included (its issue #4844), which would end a range one record early.

Nothing is skipped on a transient error: a partition reported unknown, or a log that ends before the
planned end, is confirmed against the leader's watermarks for :data:`CONFIRM_S` first (librdkafka's
metadata lags behind added partitions; a new leader's high watermark can lag its predecessor's). A
batch librdkafka cannot decode (CRC mismatch, decompression failure) fails the task, as Spark's consumer does.

A range that makes no progress at all for :data:`STALE_KEPT_S` asks the partition's leader whether it is there,
as for a partition reported unknown, and asks for the topic's id (``read/topic_check.py``): a topic deleted and
re-created since the consumer learnt of it starts again at leader epoch 0, below the epoch librdkafka remembers of
it, and librdkafka ignores the new topic's metadata as stale while every fetch answers UNKNOWN_LEADER_EPOCH; a new id
fails the task at once. Its consumer is then replaced by a new one: always one kept from an earlier read
(``read/idle_consumers.py``), once one the task made itself. The other consumers kept with its settings are closed
too, and a pack's later ranges of the topic start on new ones.

An error event at or past a range's end concerns no offset of the range: the range is complete (everything below
the event was delivered before it).

A read that stops moving fails after ``kafkaConsumer.pollTimeoutMs`` (see ``read/progress.py``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator, Sequence

import pyarrow as pa

from spark_kafka_eos._internal.client_errors import ClientCallError, KafkaErrorCode
from spark_kafka_eos._internal.config.reader import ReaderOptions
from spark_kafka_eos._internal.read.authorization import topic_authorization_error
from spark_kafka_eos._internal.read.data_loss import moved_back_problem, report_data_loss
from spark_kafka_eos._internal.read.fetchers import open_fetcher
from spark_kafka_eos._internal.read.fetchers.range_fetcher import FetchError, RangeFetcher
from spark_kafka_eos._internal.read.idle_consumers import IDLE_CONSUMERS
from spark_kafka_eos._internal.read.planner import OffsetRange, deleted_offsets
from spark_kafka_eos._internal.read.progress import FetchProgress, StallWatch
from spark_kafka_eos._internal.read.topic_check import check_at_stall, check_still_planned, ranges_still_planned
from spark_kafka_eos.errors import KafkaEosReadError

log = logging.getLogger(__name__)

_OUT_OF_RANGE = {KafkaErrorCode.AUTO_OFFSET_RESET, KafkaErrorCode.OFFSET_OUT_OF_RANGE}
_VANISHED = {KafkaErrorCode.UNKNOWN_TOPIC_OR_PART, KafkaErrorCode.UNKNOWN_PARTITION, KafkaErrorCode.UNKNOWN_TOPIC}
_UNDECODABLE = {KafkaErrorCode.BAD_MSG, KafkaErrorCode.BAD_COMPRESSION, KafkaErrorCode.NOT_IMPLEMENTED, KafkaErrorCode.UNSUPPORTED_FEATURE}
"""Errors with which librdkafka skips a fetched batch it cannot decode."""
CONFIRM_S = 10.0
"""How long a partition reported unknown, or a log ending before the planned end, must stay so (the
leader's watermarks asked about once a second) before it counts as lost."""
_CONFIRM_EVERY_S = 1.0
STALE_KEPT_S = 1.0
"""How long a consumer kept from an earlier read may make no progress at all (no record, no position moved, no
partition-EOF event) before it is replaced by a new one. A new consumer costs a connection and a metadata request
(tens of ms), so a false suspicion (a leader election under way) costs little. A kept consumer whose broker crashed
and came back made no request at all until it was replaced (broker request log, ``make bench-faults``' crash), so
this wait is part of a stream's time back after a broker's crash."""
_MAX_MESSAGES_PER_POLL = 10_000
_POLL_TIMEOUT_S = 0.05


READ_AHEAD = 4
"""How many ranges of one Spark partition have a consumer assigned at once: while one range is read, the next
ones' first fetches are already under way. A packed Spark partition holds many small ranges (one Kafka partition
each), and read one at a time each would cost a fetch round trip of its own."""


def read_offset_range(options: ReaderOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The committed records of ``offset_range`` (read_committed by default), in offset order."""
    return read_offset_ranges(options, (offset_range,))


def read_offset_ranges(options: ReaderOptions, ranges: Sequence[OffsetRange]) -> Iterator[pa.RecordBatch]:
    """The committed records of each of ``ranges``, one range after another, each in offset order. Up to
    :data:`READ_AHEAD` ranges have their consumer assigned at a time (each range its own consumer)."""
    readable = ranges_still_planned(options, [r for r in ranges if r.size > 0])
    waiting = deque(readable)
    assigned: deque[_RangeReader] = deque()
    pack = _Pack()
    try:
        while waiting or assigned:
            while waiting and len(assigned) < READ_AHEAD:
                assigned.append(_RangeReader.assigned(options, waiting.popleft(), pack))
            reader = assigned[0]
            yield from reader.batches()
            assigned.popleft()
            reader.release()
        check_still_planned(options, readable)
    except BaseException:
        for reader in assigned:
            reader.close()
        raise


class _IdChecks:
    """When a stalled range asks for its topic's id: at its first stall, then at doubling intervals while the stall
    lasts (a broker that is down answers no look-up either, and each waits out its timeout)."""

    def __init__(self, since: float) -> None:
        self._next, self._every = since, STALE_KEPT_S

    def due(self, now: float) -> bool:
        if now < self._next:
            return False
        self._next, self._every = now + self._every, 2 * self._every
        return True


class _Pack:
    """What the range readers of one task learn for each other: the topics whose kept consumers were found stale,
    and the topics found gone (with when their doubt began), so that the pack's later ranges of a deleted topic
    settle their doubt at once instead of waiting :data:`CONFIRM_S` each, one after another."""

    def __init__(self) -> None:
        self.stale_topics: set[str] = set()
        self.gone_since: dict[str, float] = {}


class _RangeReader:
    @classmethod
    def assigned(cls, options: ReaderOptions, offset_range: OffsetRange, pack: _Pack | None = None) -> _RangeReader:
        """A reader of ``offset_range`` whose consumer is assigned at its start: it fetches from now on."""
        fetch_progress = FetchProgress(offset_range.topic, offset_range.partition)
        fetcher = open_fetcher(options, offset_range, fetch_progress.on_statistics)
        try:
            fetcher.assign(offset_range.start)
        except BaseException:
            fetcher.close()
            raise
        return cls(options, offset_range, fetcher, fetch_progress, pack)

    def __init__(
        self, options: ReaderOptions, offset_range: OffsetRange, fetcher: RangeFetcher, fetch_progress: FetchProgress,
        pack: _Pack | None = None,
    ) -> None:
        self._options = options
        self._pack = pack or _Pack()
        self._range = offset_range
        self._fetcher = fetcher
        self._fetch_progress = fetch_progress
        self._position = offset_range.start
        self._group_refused = False
        self._eof_at: int | None = None
        """The offset of the last partition-EOF event, while no record was delivered after it."""
        self._doubt: _Doubt | None = None
        self._replaced = False
        """Whether this range's consumer was replaced already (a new one is replaced at most once)."""

    @property
    def _name(self) -> str:
        r = self._range
        return f"{r.topic}-{r.partition} [{r.start}, {r.end})"

    def release(self) -> None:
        """The range is read: its consumer may serve another one."""
        self._fetcher.release()

    def close(self) -> None:
        """The read failed or was given up: close the consumer."""
        self._fetcher.close()

    def batches(self) -> Iterator[pa.RecordBatch]:
        end = self._range.end
        topic = self._range.topic
        per_poll = min(self._options.max_records_per_batch, _MAX_MESSAGES_PER_POLL)
        watch = StallWatch(self._options.poll_timeout_ms / 1000.0, time.monotonic())
        if self._fetcher.reused and topic in self._pack.stale_topics:
            yield from self._replace_consumer("another range of this task found its kept consumer stale")
        if topic in self._pack.gone_since and self._doubt is None:
            # Another range of this task found the topic gone: ask this partition's leader at once.
            self._doubt = _Doubt(_VANISHED_KIND, f"topic {topic} found gone by another range of this task",
                                 self._pack.gone_since[topic], shared=True)
        moved, moved_at = self._position, time.monotonic()
        id_checks = _IdChecks(moved_at)
        while self._position < end:
            # Ask for no more than the range holds: a fetch waits for the whole count (or the
            # timeout), and markers or aborted records in the range make it return fewer.
            step = self._fetcher.step(min(per_poll, end - self._position), _POLL_TIMEOUT_S, end)
            if step.last_offset is not None:
                self._position = step.last_offset + 1
                self._eof_at = None
            if step.past_end:
                self._position = end
            yield from self._fetcher.batches(flush=False)
            error = step.error
            if error is not None and self._position < end:
                if error.offset is not None and error.offset >= end and not error.fatal:
                    # About offsets past the range (a corrupt batch, an offset reset right after its end): everything
                    # below it was delivered before it, so the range is complete.
                    log.debug("Reading %s: %s at offset %d, past the range: the range is complete", self._name, error.reason, error.offset)
                    self._position = end
                else:
                    self._on_error(error)
            if self._position < end and not self._fetcher.pending():
                # Markers and aborted records are not returned, but they move the position. So do records
                # delivered but still pending behind an error event: only ask once they are taken.
                position = self._fetcher.position()
                self._position = max(self._position, position if self._eof_at is None else min(position, self._eof_at))
            if self._position < end and self._doubt is not None:
                self._settle_doubt(time.monotonic())
            now = time.monotonic()
            if self._position != moved or self._eof_at is not None:
                moved, moved_at = self._position, now
                id_checks = _IdChecks(now)
            elif self._position < end and now - moved_at > STALE_KEPT_S:
                if id_checks.due(now):
                    check_at_stall(self._options, self._range)
                if self._fetcher.reused or not self._replaced:
                    yield from self._replace_consumer(f"it made no progress at offset {self._position} for {STALE_KEPT_S:g}s")
                if self._doubt is None:
                    # No event either (librdkafka tells a consumer that an assigned topic does not exist only once its
                    # topic.metadata.propagation.max.ms passed, if at all): ask the leader whether the partition is there.
                    self._doubt = _Doubt(_VANISHED_KIND, f"no progress at offset {self._position} for {STALE_KEPT_S:g}s", now)
                    self._doubt.next_check = now
                moved_at = time.monotonic()
            if self._position < end and watch.stalled(self._position, self._fetch_progress.next_offset, time.monotonic()):
                raise KafkaEosReadError(
                    f"Reading {self._name} made no progress at offset {self._position} for "
                    f"{watch.limit_s:g}s (kafkaConsumer.pollTimeoutMs). Check that the brokers at "
                    f"{self._options.bootstrap_servers} are reachable from the executors."
                )
        yield from self._fetcher.batches(flush=True)

    def _replace_consumer(self, why: str) -> list[pa.RecordBatch]:
        """Read on with a new consumer instead of the kept one (see the module's docstring); the old one's batches."""
        old = self._fetcher
        log.info(
            "Reading %s on a consumer %s: %s; reading on with a new consumer (one that remembers a higher leader epoch "
            "than the partition's leader has, such as a broker's whose data was lost, is ignored by librdkafka)",
            self._name, "kept from an earlier read" if old.reused else "made for this task", why,
        )
        self._pack.stale_topics.add(self._range.topic)
        self._replaced = True
        built = old.batches(flush=True)
        old.close()
        IDLE_CONSUMERS.discard(old.key)
        self._fetcher = open_fetcher(self._options, self._range, self._fetch_progress.on_statistics, fresh=True)
        self._fetcher.assign(self._position)
        return built

    def _on_error(self, error: FetchError) -> None:
        code = error.code
        if code == KafkaErrorCode.PARTITION_EOF:
            # Everything below the EOF offset was fetched, and delivered before this event.
            self._position = max(self._position, error.offset or 0)
            self._eof_at = self._position
            if self._position < self._range.end and self._doubt is None:
                self._doubt = _Doubt(_LOG_ENDS_EARLY, error.reason, time.monotonic())
        elif code in _OUT_OF_RANGE:
            self._skip_lost_offsets(error)
        elif code in _VANISHED:
            if self._doubt is None or self._doubt.kind != _VANISHED_KIND:
                gone_since = self._pack.gone_since.get(self._range.topic)
                self._doubt = _Doubt(_VANISHED_KIND, error.reason, time.monotonic() if gone_since is None else gone_since,
                                     shared=gone_since is not None)
        elif code in _UNDECODABLE:
            raise KafkaEosReadError(
                f"Reading {self._name} failed at offset {error.offset if error.offset is not None else self._position}: "
                f"librdkafka cannot decode the records there ({error.reason}), and would skip them. Nothing of this "
                "range is skipped silently. Fix: find out what wrote them (a check with kafka-dump-log on the segment); "
                "if losing them is acceptable, delete them (kafka-delete-records) or start the query past them."
            )
        elif code == KafkaErrorCode.GROUP_AUTHORIZATION_FAILED:
            # librdkafka looks up the coordinator of the consumer's group, which this reader never
            # uses (explicit offsets, no commits); like Spark's assign-only consumer, read on.
            if not self._group_refused:
                log.warning("Reading %s: %s; the source uses no consumer group, so this is ignored.", self._name, error.reason)
            self._group_refused = True
        elif code == KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED:
            raise topic_authorization_error(self._options, [self._range.topic], f"{error.reason} while reading {self._name}")
        elif code > 0 or error.fatal:
            raise KafkaEosReadError(f"Reading {self._name} failed at offset {self._position}: {error.reason}")
        else:
            # Local, transient conditions (broker down, transport): librdkafka retries; the
            # stall limit turns a lasting one into an error.
            log.info("Reading %s: %s", self._name, error.reason)

    def _skip_lost_offsets(self, error: FetchError) -> None:
        low, high = self._fetcher.watermarks(self._options.request_timeout_s)
        if self._position >= high:
            # The log ends below the position: a re-created topic or a truncated log, or a leader whose high watermark
            # lags its predecessor's. Confirmed with the leader for CONFIRM_S before it counts (_settle_doubt), the
            # stopped fetcher assigned again once the records are there.
            if self._doubt is None or self._doubt.kind != _OUT_OF_RANGE_KIND:
                self._doubt = _Doubt(_OUT_OF_RANGE_KIND, error.reason, time.monotonic())
                self._doubt.next_check = time.monotonic()
            return
        if self._position < low:
            report_data_loss(
                f"{self._name}: offset {self._position} no longer exists ({error.reason}); the earliest available "
                f"offset is {low}, so {deleted_offsets(self._position, low)} (retention or deleteRecords) before they "
                "were read.",
                self._options.fail_on_data_loss, f"Skipping them and reading on from offset {low}",
            )
        else:
            # The position is inside the leader's log: the answer came from a replica behind it (a follower read
            # with client.rack, a new leader still catching up). Nothing was deleted; ask again.
            log.info("Reading %s: %s at offset %d, inside the log [%d, %d): reading on from there",
                     self._name, error.reason, self._position, low, high)
        self._position = max(self._position, low)
        if self._position < self._range.end:
            # After an offset-reset error the partition's fetcher is stopped and seek() refuses
            # ("erroneous state"); a fresh assignment restarts it.
            self._fetcher.assign(self._position)

    def _settle_doubt(self, now: float) -> None:
        """Ask the leader about a partition reported unknown, or a log that ended before the range: the doubt
        is gone once the partition answers with a high watermark past the position; it is a loss once it
        lasted :data:`CONFIRM_S`."""
        doubt = self._doubt
        assert doubt is not None
        if now < doubt.next_check:
            return
        doubt.next_check = now + _CONFIRM_EVERY_S
        try:
            _, high = self._fetcher.watermarks(min(self._options.request_timeout_s, _CONFIRM_EVERY_S * 5))
        except ClientCallError as err:
            code = err.error.code
            if code not in _VANISHED and code != KafkaErrorCode.UNKNOWN_TOPIC_ID:
                return  # not an answer (a timeout, a broker away): librdkafka retries, the stall limit bounds it
            high = None
        if high is not None and doubt.shared:
            # The partition answers: another range's finding about the topic does not hold here; its own clock starts.
            doubt.since, doubt.shared = now, False
        if high is not None and high > self._position:
            self._doubt = None  # the records are there: librdkafka fetches them
            self._pack.gone_since.pop(self._range.topic, None)
            if doubt.kind == _OUT_OF_RANGE_KIND:
                self._fetcher.assign(self._position)  # stopped by the offset-reset error
            return
        if high is not None and high >= self._range.end:
            return
        if now - doubt.since < CONFIRM_S:
            return
        if high is not None and doubt.kind == _OUT_OF_RANGE_KIND:
            report_data_loss(
                moved_back_problem((self._range.topic, self._range.partition), self._position, high)
                + f" Reading {self._name} failed: {doubt.reason} (its leader has reported that end for {CONFIRM_S:g}s).",
                self._options.fail_on_data_loss, f"Skipping the rest of {self._name}",
            )
        elif high is None:
            self._pack.gone_since.setdefault(self._range.topic, doubt.since)
            report_data_loss(
                f"{self._name}: the topic or partition is gone ({doubt.reason}; its leader has not known it for "
                f"{CONFIRM_S:g}s) at offset {self._position}.",
                self._options.fail_on_data_loss, "Skipping what is left of the range",
            )
        else:
            report_data_loss(
                moved_back_problem((self._range.topic, self._range.partition), self._range.end, high,
                                   f"the range read ends at offset {self._range.end}, and its leader has reported for "
                                   f"{CONFIRM_S:g}s that its last stable offset (the end of what a read_committed reader sees) is")
                + f" Offsets {high} to {self._range.end - 1} of {self._name} do not exist.",
                self._options.fail_on_data_loss, "Skipping what is left of the range",
            )
        self._position = self._range.end


_LOG_ENDS_EARLY = "log ends early"
_OUT_OF_RANGE_KIND = "out of range"
_VANISHED_KIND = "vanished"


class _Doubt:
    """A sign that the rest of the range may be gone, to confirm with the leader before it counts."""

    def __init__(self, kind: str, reason: str, since: float, shared: bool = False) -> None:
        self.kind, self.reason, self.since = kind, reason, since
        self.shared = shared
        """``since`` is when another range of the task began to doubt the topic, which it then found gone."""
        self.next_check = since + _CONFIRM_EVERY_S
