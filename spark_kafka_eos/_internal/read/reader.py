"""Spark's reader interfaces for ``kafka_eos``: a batch reader and a micro-batch stream reader.

Planning runs on the driver (``partitions``, ``initialOffset``, ``latestOffset``); ``read``
runs on executors on a pickled copy, so the driver's Kafka admin client is never pickled.

Stream offsets are ``{"topic": {"partition": offset}}``, the form of Spark's Kafka source. The
end offset of a run's first micro-batch also carries the run's start under ``"@origin"`` (``@`` is
not allowed in topic names): see :meth:`KafkaEosStreamReader.latestOffset`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from spark_kafka_eos._internal.config.reader import PartitionKey, ReaderOptions
from spark_kafka_eos._internal.read.data_loss import describe, moved_back_problem, report_data_loss
from spark_kafka_eos._internal.read.fetchers import check_consumer_config
from spark_kafka_eos._internal.read.offset_lookup import GroupGuard, KafkaOffsetLookup, PartitionsVanished
from spark_kafka_eos._internal.read.partition_reader import read_offset_ranges
from spark_kafka_eos._internal.read.planner import (
    OffsetRange,
    Offsets,
    PackedRanges,
    check_start_available,
    deleted_offsets,
    limit_offsets,
    plan_batch,
    plan_partitions,
    ranges_of,
    resolve_bound,
    restart_moved_back,
)
from spark_kafka_eos._internal.read.progress_group import commit_progress
from spark_kafka_eos._internal.read.stuck_partitions import StuckPartitionWatch
from spark_kafka_eos._internal.read.topic_identity import TOPIC_IDS_KEY, TopicIds, ids_in, known, recreated, report_recreated
from spark_kafka_eos._internal.retry import Backoff, Deadline, wait_until
from spark_kafka_eos._internal.worker_gc import freeze_driver_call_heap, freeze_worker_heap
from spark_kafka_eos.errors import KafkaEosUnavailableError

log = logging.getLogger(__name__)
T = TypeVar("T")

StreamOffset = dict[str, Any]

# Key of the start offsets a run's first micro-batch was planned from; never a topic name.
ORIGIN_KEY = "@origin"

# How many times planning starts again from a new listing when partitions it listed vanish before their offsets are
# looked up (a topic deleted meanwhile): the new listing lacks them, and failOnDataLoss decides.
REPLANS = 3


def to_stream_offset(offsets: Offsets, topic_ids: Mapping[str, str] | None = None) -> StreamOffset:
    """Spark's offset JSON: ``{topic: {partition: offset}}``, with each topic's id when ``topic_ids`` is given."""
    out: StreamOffset = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    ids = {t: topic_ids[t] for t in sorted(out) if topic_ids and t in topic_ids}
    if ids:
        out[TOPIC_IDS_KEY] = ids
    return out


def from_stream_offset(offset: StreamOffset) -> Offsets:
    return {
        (topic, int(p)): int(o)
        for topic, per_partition in offset.items() if not topic.startswith("@")
        for p, o in per_partition.items()
    }


def origin_of(end: StreamOffset) -> Offsets:
    """The start a first micro-batch was planned from, recorded in its end offset (else empty)."""
    return from_stream_offset(end.get(ORIGIN_KEY, {}))


class _KafkaReaderBase:
    """Shared by both readers: the driver's :class:`KafkaOffsetLookup` (created on first use,
    never pickled) and the executor-side ``read``."""

    options: ReaderOptions
    group_guard: GroupGuard | None = None
    _lookup: KafkaOffsetLookup | None = None

    @property
    def lookup(self) -> KafkaOffsetLookup:
        if self._lookup is None:
            self._lookup = KafkaOffsetLookup(self.options, self.group_guard)
        return self._lookup

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lookup", None)
        return state

    def _planned(self, what: str, plan: Callable[[], T]) -> T:
        """``plan()``, started again when a partition it listed vanished before its offsets were looked up
        (UNKNOWN_TOPIC_OR_PART, asked fetchOffset.numRetries more times): the next listing no longer names it,
        and failOnDataLoss decides what that means, as for any partition that vanished between two plans."""
        for attempt in range(1, REPLANS + 1):
            try:
                return plan()
            except PartitionsVanished as vanished:
                last = vanished
                log.info("kafka_eos %s: %s Planning again from a new listing (%d of %d).", what, vanished, attempt, REPLANS)
        raise KafkaEosUnavailableError(
            f"kafka_eos could not plan the {what} of {self.options.subscription.describe()}: {REPLANS} times Kafka at "
            f"{self.options.bootstrap_servers} listed partitions that its offset look-ups then did not know ({last}) "
            "Topics are being deleted or re-created; run the query again once they settle."
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, (OffsetRange, PackedRanges)):
            # Spark reads one placeholder partition when a plan has none: nothing to read.
            return iter(())
        freeze_worker_heap(self.options.gc_freeze)
        return read_offset_ranges(self.options, ranges_of(partition))


class KafkaEosBatchReader(_KafkaReaderBase, DataSourceReader):
    """``spark.read.format("kafka_eos")``: read_committed ranges bounded by the LSO at planning."""

    def __init__(self, options: ReaderOptions, group_guard: GroupGuard | None = None) -> None:
        check_consumer_config(options)
        self.options = options
        self.group_guard = group_guard

    def partitions(self) -> Sequence[InputPartition]:
        return self._planned("batch read", self._plan)

    def _plan(self) -> Sequence[InputPartition]:
        opts, lookup = self.options, self.lookup
        assert opts.ending is not None
        tps = lookup.partitions(opts.subscription, must_exist=True)
        earliest, latest = lookup.earliest(tps), lookup.latest(tps)
        ranges = plan_batch(
            tps, opts.starting, opts.ending, earliest, latest, lookup, opts.fail_on_data_loss, opts.timestamp_strategy
        )
        planned = plan_partitions(ranges, opts.min_partitions, opts.max_records_per_partition, opts.min_records_per_partition)
        log.info("kafka_eos batch read of %s: %d ranges, %d offsets", opts.subscription.describe(), len(planned), sum(r.size for r in planned))
        freeze_driver_call_heap(opts.gc_freeze)
        return planned


class StreamReaderCore(_KafkaReaderBase, DataSourceStreamReader):
    """``spark.readStream.format("kafka_eos")``: micro-batches never planned past the LSO. What every
    Spark's stream reader shares; how Spark asks for the next end offset differs by version
    (:mod:`~spark_kafka_eos._internal.read.admission_stream_reader` on Spark 4.2+,
    :mod:`~spark_kafka_eos._internal.read.legacy_stream_reader` on 4.0 and 4.1).

    Whenever a partition is no longer where the query stands (deleted, re-created, truncated,
    records deleted below the position), ``failOnDataLoss`` decides: a loud error, or a warning
    and a read from the partition's earliest offset. Never a silent skip.
    """

    def __init__(self, options: ReaderOptions, group_guard: GroupGuard | None = None) -> None:
        check_consumer_config(options)
        self.options = options
        self.group_guard = group_guard
        self._initial: StreamOffset | None = None
        self._latest: Offsets | None = None
        self._log_end: Offsets | None = None
        self._available_now_target: Offsets | None = None
        self._last_trigger_at: float | None = None
        # (partition, position) that latestOffset restarted at the earliest offset, so that
        # partitions() knows it even when the log grew past the position in between.
        self._moved_back: dict[tuple[PartitionKey, int], int] = {}
        # (partition, earliest offset) of added partitions whose deleted first records latestOffset already
        # reported (a warning under failOnDataLoss=false), so that partitions() does not warn twice.
        self._added_reported: set[tuple[PartitionKey, int]] = set()
        # (topic, new id) of re-created topics latestOffset already reported, so that partitions() does not warn twice.
        self._renewed_reported: set[tuple[str, str]] = set()
        self._progress: Offsets = {}  # last offsets committed to progressGroup
        self._stuck = StuckPartitionWatch(options.connection, options.stuck_partition_warning_ms)

    def initialOffset(self) -> StreamOffset:
        """Resolved once per run: Spark asks again before batch 0 commits, and a second
        resolution of ``latest`` or ``earliest`` would skip what arrived or expired between.
        Across a restart, the first micro-batch's end offset keeps the first answer."""
        if self._initial is None:
            self._initial = self._planned("initial offset", self._resolve_initial)
            log.info("kafka_eos stream of %s starts at %s", self.options.subscription.describe(), self._initial)
        return self._initial

    def _resolve_initial(self) -> StreamOffset:
        opts, lookup = self.options, self.lookup
        tps = lookup.partitions(opts.subscription, must_exist=opts.subscription.kind == "assign")
        earliest, latest = lookup.earliest(tps), lookup.latest(tps)
        return to_stream_offset(resolve_bound(opts.starting, tps, earliest, latest, lookup, False, opts.timestamp_strategy),
                                lookup.topic_ids(sorted({topic for topic, _ in tps})))

    def _next_end(self, start: StreamOffset, max_rows: int | None, min_rows: int | None, progress: bool = True) -> StreamOffset:
        """The end of the next micro-batch from ``start``: at most ``max_rows`` offsets, none past the LSO
        (or the Trigger.AvailableNow target); ``start`` itself when there is nothing new, or when
        ``min_rows`` asks to wait. ``progress``: ``start`` is the stream's position, to report to
        progressGroup."""
        return self._planned("next micro-batch", lambda: self._plan_next_end(start, max_rows, min_rows, progress))

    def _plan_next_end(self, start: StreamOffset, max_rows: int | None, min_rows: int | None, progress: bool) -> StreamOffset:
        # Spark plans from the end of the last committed micro-batch: that is the stream's progress.
        # (Spark calls commit() for a batch only when it plans the next one, so never for the last
        # batch of a Trigger.AvailableNow run.)
        position = from_stream_offset(start)
        if progress:
            self._commit_progress(position)
        begin = self._current_start(position)
        ids = self.lookup.topic_ids(sorted({topic for topic, _ in begin}))
        renewed = self._restart_recreated(begin, ids_in(start), ids)
        stable = self.lookup.latest(list(begin))
        # The same topic (its id known then and now) past the run's first micro-batch: a log below the position was cut
        # back, not re-created; a given startingOffsets past the end is not a position the query read up to.
        first = self._is_initial(position)
        same = set() if first else set(known(ids_in(start)).items()) & set(known(ids).items())
        begin.update(self._restart_moved_back(begin, stable, {topic for topic, _ in same}))
        self._latest = stable
        # Where each log ends, committed or not: the lag Spark's progress shows (reportLatestOffset) counts the records
        # an open transaction holds back, and a partition held back too long is warned about.
        self._log_end = self.lookup.log_end(list(begin))
        self._stuck.observe(stable, self._log_end)
        if self._available_now_target is not None:
            target = self._available_now_target
            stable = {tp: min(lso, target.get(tp, begin[tp])) for tp, lso in stable.items()}
        # Offsets beyond the LSO are not readable yet; a start past it (inside an open
        # transaction) waits.
        available = {tp: max(begin[tp], stable[tp]) for tp in begin}
        backlog = sum(available[tp] - begin[tp] for tp in begin)
        if min_rows is not None and self._delay_batch(backlog, min_rows):
            return start
        end = limit_offsets(begin, available, max_rows)
        if end == position and not renewed:
            return start  # unchanged, so that Spark sees no new data and plans no batch
        return self._with_origin(position, to_stream_offset(end, ids))

    def _is_initial(self, position: Offsets) -> bool:
        """Whether ``position`` is the start this run resolved (``initialOffset()``): its first micro-batch's."""
        return self._initial is not None and position == from_stream_offset(self._initial)

    def _restart_recreated(self, begin: Offsets, before: TopicIds, now: TopicIds) -> list[str]:
        """Topics whose id changed since ``before`` (re-created, whatever their offsets say), restarted in ``begin`` at
        their earliest offsets (or a data-loss error); returns them."""
        renewed = recreated(before, now, {topic for topic, _ in begin})
        for topic in renewed:
            report_recreated(topic, before[topic], now[topic], self.options.fail_on_data_loss,
                             "when the query last planned", "Reading the new topic from its earliest offsets")
            self._renewed_reported.add((topic, now[topic]))
        tps = [tp for tp in begin if tp[0] in renewed]
        begin.update(self.lookup.earliest(tps))
        return renewed

    def _with_origin(self, start: Offsets, end: StreamOffset) -> StreamOffset:
        """``end``, carrying ``start`` when this is the run's first micro-batch.

        Spark writes the end offset to the checkpoint before the batch runs, but not the start:
        after a crash before the batch commits, it replays the batch with a start from
        ``initialOffset()`` resolved anew (Spark's own source keeps the first answer in the
        checkpoint's source metadata, which a Python stream reader cannot reach). ``partitions``
        plans from the recorded start instead, so records that arrived (``latest``) or expired
        (``earliest``, retention) in between are read or reported, never skipped silently."""
        if not self._is_initial(start):
            return end
        return {**end, ORIGIN_KEY: to_stream_offset(start)}

    def _delay_batch(self, backlog: int, min_rows: int) -> bool:
        """Spark's rule for minOffsetsPerTrigger: the first trigger of a run never waits; later
        ones wait for ``min_rows`` offsets or until maxTriggerDelay passed since the last batch."""
        now = time.monotonic()
        overdue = self._last_trigger_at is None or (now - self._last_trigger_at) * 1000 >= self.options.max_trigger_delay_ms
        if not overdue and backlog < min_rows:
            return True
        self._last_trigger_at = now
        return False

    def _current_start(self, start: Offsets) -> Offsets:
        """``start`` for the partitions that exist now. Vanished ones follow failOnDataLoss;
        partitions added since are read from their earliest offset, which is data loss when it
        is not 0 (their first records were deleted before the query saw them)."""
        tps = self._partitions_now(start)
        vanished = sorted(set(start) - set(tps))
        if vanished:
            report_data_loss(
                "Partitions the query reads no longer exist (topic deleted, or re-created with fewer partitions): "
                + ", ".join(f"{describe(tp)} (the query stands at offset {start[tp]})" for tp in vanished) + ".",
                self.options.fail_on_data_loss, "Going on without them",
            )
        added = [tp for tp in tps if tp not in start]
        current = {tp: start[tp] for tp in tps if tp in start}
        first = self.lookup.earliest(added)
        for tp in sorted(tp for tp, offset in first.items() if offset > 0):
            report_data_loss(
                f"{describe(tp)} appeared after the query last planned, and its {deleted_offsets(0, first[tp])} "
                f"before the query read it (its earliest offset is {first[tp]}).",
                self.options.fail_on_data_loss, f"Reading it from offset {first[tp]}",
            )
            self._added_reported.add((tp, first[tp]))
        current.update(first)
        return current

    def _partitions_now(self, position: Collection[PartitionKey]) -> list[PartitionKey]:
        """The partitions the subscription reads now. One metadata answer that lacks partitions of ``position``
        is not taken for their deletion (a broker that has not caught up; the executor, too, doubts a vanished
        partition for 10 s): the listing is asked again, fetchOffset.numRetries times (at least once)
        fetchOffset.retryIntervalMs apart, and only what every answer lacks has vanished. A topic of
        ``position`` that the principal may no longer describe (Kafka leaves it out of the metadata, as if it
        were deleted: a subscribePattern's topic whose Describe ACL was removed) fails with the ACL to grant,
        whatever failOnDataLoss says: taken for deleted, it would be skipped, then read again from its
        earliest offset once the ACL is back."""
        wanted = set(position)
        listed = self.lookup.partitions(self.options.subscription, must_exist=False)
        for _ in range(max(1, self.options.fetch_offset_retries)):
            if wanted <= set(listed):
                return listed
            log.info("kafka_eos: %s not in the metadata; asking again before taking them for deleted",
                     ", ".join(describe(tp) for tp in sorted(wanted - set(listed))))
            time.sleep(self.options.fetch_offset_retry_interval_ms / 1000.0)
            listed = self.lookup.partitions(self.options.subscription, must_exist=False)
        # Visible by name, it is there: a listing that leaves it out came from a broker whose metadata lags.
        visible = self.lookup.check_authorized(sorted({topic for topic, _ in wanted - set(listed)}))
        return listed + [(topic, p) for topic, parts in visible.items() for p in parts if (topic, p) not in listed]

    def _restart_moved_back(self, position: Offsets, stable: Offsets, same_topics: Collection[str] = ()) -> Offsets:
        """Partitions whose log now ends below ``position``, restarted at their earliest offset
        (or a data-loss error). Only a high watermark below the position counts: an LSO below it
        is an open transaction to wait for. Like Spark's source, a low answer is asked again
        (fetchOffset.numRetries) before it counts, in case a broker answered from a stale log."""
        below = [tp for tp in position if stable[tp] < position[tp]]
        if not below:
            return {}
        log_end: Offsets = {}

        def caught_up() -> bool:
            nonlocal below, log_end
            log_end = self.lookup.log_end(below)
            below = [tp for tp in below if log_end[tp] < position[tp]]
            return not below

        if wait_until(caught_up, Deadline.never(), Backoff(self.options.fetch_offset_retry_interval_ms / 1000.0),
                      attempts=self.options.fetch_offset_retries + 1):
            return {}
        restarted = restart_moved_back(position, {tp: log_end[tp] for tp in below}, self.lookup.earliest(below),
                                       self.options.fail_on_data_loss, [tp for tp in below if tp[0] in same_topics])
        self._moved_back.update(((tp, position[tp]), offset) for tp, offset in restarted.items())
        return restarted

    def partitions(self, start: StreamOffset, end: StreamOffset) -> Sequence[InputPartition]:
        if start == end:
            # Nothing to read. Spark asks this on a restart (setLatestSeenOffset, the checkpoint's last end)
            # and throws the plan away: planning it from a first batch's recorded origin would report
            # records that retention deleted since that batch committed as lost.
            return []
        return self._planned("micro-batch's partitions", lambda: self._plan_partitions(start, end))

    def _plan_partitions(self, start: StreamOffset, end: StreamOffset) -> Sequence[InputPartition]:
        begin, finish = from_stream_offset(start), from_stream_offset(end)
        # Only a run's first micro-batch (or its replay) starts at initialOffset(), which Spark resolves anew on a
        # restart; an end offset that records the batch's start (its origin) says where it really began.
        resolved_again = self._is_initial(begin) and ORIGIN_KEY not in end
        if self._is_initial(begin):
            # Spark plans from initialOffset() only for a run's first micro-batch (or its replay). Any other
            # start is the end of the micro-batch before: an end that carries an origin (a Trigger.AvailableNow
            # target Spark 4.0/4.1 asked for before a restart's replay) must not send the read back there.
            begin.update(origin_of(end))
        existing = set(self._partitions_now(finish)) if finish else set()
        ids = self.lookup.topic_ids(sorted({topic for topic, _ in finish}))
        # Planned over a topic re-created since: its planned records went with the old topic. The next micro-batch
        # starts from this end, whose id is the old one, and reads the new topic from its earliest offsets.
        for topic in recreated(ids_in(end), ids, {topic for topic, _ in finish}):
            report_recreated(topic, ids_in(end)[topic], ids[topic], self.options.fail_on_data_loss,
                             "when this micro-batch was planned", "Skipping its ranges in this micro-batch")
            finish = {tp: offset for tp, offset in finish.items() if tp[0] != topic}
        # Re-created between the batch before and this one: latestOffset restarted it at its earliest offsets (and
        # reported it, unless that was a run before a restart).
        renewed = set(recreated(ids_in(start), ids_in(end)))
        for topic in sorted(renewed - {topic for topic, _ in self._renewed_reported}):
            report_recreated(topic, ids_in(start)[topic], ids_in(end)[topic], self.options.fail_on_data_loss,
                             "when the micro-batch before was planned", "Reading the new topic from its earliest offsets")
            self._renewed_reported.add((topic, ids_in(end)[topic]))
        begin = {tp: offset for tp, offset in begin.items() if tp[0] not in renewed}
        gone = sorted(set(finish) - existing)
        if gone:
            # Planned (perhaps before a restart) but deleted since: nothing of them can be read.
            report_data_loss(
                f"Partitions of this micro-batch no longer exist: {', '.join(describe(tp) for tp in gone)} "
                f"(planned up to offsets {', '.join(str(finish[tp]) for tp in gone)}).",
                self.options.fail_on_data_loss, "Skipping them",
            )
        readable = sorted(set(finish) & existing)
        earliest = self.lookup.earliest(readable)
        # A partition added after `start` was planned is read from its earliest offset.
        first = {tp: begin.get(tp, earliest[tp]) for tp in readable}
        self._report_added_partitions([tp for tp in readable if tp not in begin and tp[0] not in renewed], earliest)
        behind = [tp for tp in readable if finish[tp] < first[tp] and tp in begin]
        log_end = self.lookup.log_end(behind) if behind else {}
        ranges = []
        for tp in readable:
            start_at = (self._start_behind_end(tp, first[tp], finish[tp], earliest[tp], log_end[tp], resolved_again)
                        if tp in behind else first[tp])
            if start_at is None:
                continue
            start_at = check_start_available(tp, start_at, earliest[tp], self.options.fail_on_data_loss)
            if finish[tp] > start_at:
                ranges.append(OffsetRange(tp[0], tp[1], start_at, finish[tp], ids.get(tp[0])))
        return plan_partitions(ranges, self.options.min_partitions, self.options.max_records_per_partition,
                               self.options.min_records_per_partition)

    def _report_added_partitions(self, added: Sequence[PartitionKey], earliest: Offsets) -> None:
        """Partitions this micro-batch reads that its start does not name (added since the batch before was
        planned) start at their earliest offset now; as in Spark, one that is not 0 is data loss ("Added
        partition ... starts from X instead of 0"). latestOffset reports what it sees when it plans the batch;
        this catches what was deleted after that: a batch replayed after a restart, or records deleted between
        planning its end and its partitions."""
        for tp in sorted(added):
            if earliest[tp] > 0 and (tp, earliest[tp]) not in self._added_reported:
                report_data_loss(
                    f"Added partition {describe(tp)} starts from {earliest[tp]} instead of 0: its "
                    f"{deleted_offsets(0, earliest[tp])} (retention or deleteRecords) before this micro-batch read it.",
                    self.options.fail_on_data_loss, f"Reading it from offset {earliest[tp]}",
                )
                self._added_reported.add((tp, earliest[tp]))

    def _start_behind_end(self, tp: PartitionKey, first: int, finish: int, earliest: int, log_end: int,
                          resolved_again: bool) -> int | None:
        """Where to read ``tp`` from when a micro-batch ends before it starts; None: not at all.

        A start that is the end of the batch before (every batch but a run's first, and a first one whose end
        records its origin) is where the query stood when latestOffset planned this batch: an end below it
        means latestOffset found the partition's log below that position and restarted it at its earliest
        offset, whether that was this run (``_moved_back``) or a run before a restart, and whatever the log
        has grown to since. A truncated log this run restarted at its truncation point goes on from there; after a
        restart of the driver, where that point is no longer known, from the earliest offset."""
        fail = self.options.fail_on_data_loss
        if not resolved_again or log_end < first or (tp, first) in self._moved_back:
            # latestOffset found the partition's log below the position and restarted it.
            restart = self._moved_back.get((tp, first), earliest)
            report_data_loss(
                moved_back_problem(tp, first, finish, "this micro-batch was planned to end it at"), fail,
                f"Reading {describe(tp)} again from offset {restart}"
                + (" (its earliest)" if restart == earliest else " (where its truncated log ended)"),
            )
            return restart
        # The log did not move: the start was resolved again. Spark's engine asks initialOffset()
        # anew when it replays batch 0 after a restart; an end offset written before origins
        # were recorded (an older checkpoint) cannot tell where batch 0 started.
        report_data_loss(
            f"{describe(tp)} (topic {tp[0]}, partition {tp[1]}): the first micro-batch was planned to end at offset "
            f"{finish}, but its start, resolved again after a restart, is offset {first}: the records the batch "
            f"was planned with, below offset {finish}, may never be read.",
            fail, f"Reading nothing of {describe(tp)} in this micro-batch",
        )
        return None

    def commit(self, end: StreamOffset) -> None:
        """Spark's checkpoint owns the offsets. With ``progressGroup``, the batch's end offsets are
        also committed to that group, so that lag tools show the query's progress."""
        self._commit_progress(from_stream_offset(end))

    def _commit_progress(self, offsets: Offsets) -> None:
        if self.options.progress_group is not None and offsets and offsets != self._progress:
            commit_progress(self.options, offsets)
            self._progress = offsets

    def stop(self) -> None:
        self._lookup = None
