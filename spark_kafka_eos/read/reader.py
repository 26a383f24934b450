"""Spark's reader interfaces for ``kafka_eos``: a batch reader and a micro-batch stream reader.

Planning runs on the driver (``partitions``, ``initialOffset``, ``latestOffset``); ``read``
runs on executors on a pickled copy, so the driver's Kafka admin client is never pickled.

Stream offsets are ``{"topic": {"partition": offset}}``, the form of Spark's Kafka source.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Iterator, Optional, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from spark_kafka_eos.errors import KafkaEosDataLossError
from spark_kafka_eos.options import ReaderOptions
from spark_kafka_eos.read.offset_lookup import KafkaOffsetLookup
from spark_kafka_eos.read.partition_reader import check_consumer_config, read_offset_range
from spark_kafka_eos.read.planner import (
    OffsetRange,
    Offsets,
    check_start_available,
    limit_offsets,
    plan_batch,
    resolve_bound,
    split_ranges,
)

log = logging.getLogger(__name__)

StreamOffset = dict[str, dict[str, int]]


def to_stream_offset(offsets: Offsets) -> StreamOffset:
    out: StreamOffset = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_stream_offset(offset: StreamOffset) -> Offsets:
    return {(topic, int(p)): int(o) for topic, per_partition in offset.items() for p, o in per_partition.items()}


class _KafkaReaderBase:
    """Shared by both readers: the driver's :class:`KafkaOffsetLookup` (created on first use,
    never pickled) and the executor-side ``read``."""

    options: ReaderOptions
    _lookup: Optional[KafkaOffsetLookup] = None

    @property
    def lookup(self) -> KafkaOffsetLookup:
        if self._lookup is None:
            self._lookup = KafkaOffsetLookup(self.options)
        return self._lookup

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lookup", None)
        return state

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):
            # Spark reads one placeholder partition when a plan has none: nothing to read.
            return iter(())
        return read_offset_range(self.options, partition)


class KafkaEosBatchReader(_KafkaReaderBase, DataSourceReader):
    """``spark.read.format("kafka_eos")``: read_committed ranges bounded by the LSO at planning."""

    def __init__(self, options: ReaderOptions) -> None:
        check_consumer_config(options)
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        opts, lookup = self.options, self.lookup
        assert opts.ending is not None
        tps = lookup.partitions(opts.subscription, must_exist=True)
        earliest, latest = lookup.earliest(tps), lookup.latest(tps)
        ranges = plan_batch(
            tps, opts.starting, opts.ending, earliest, latest, lookup, opts.fail_on_data_loss, opts.timestamp_strategy
        )
        planned = split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)
        log.info("kafka_eos batch read of %s: %d ranges, %d offsets", opts.subscription.describe(), len(planned), sum(r.size for r in planned))
        return planned


class KafkaEosStreamReader(_KafkaReaderBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafka_eos")``: micro-batches never planned past the LSO."""

    def __init__(self, options: ReaderOptions) -> None:
        check_consumer_config(options)
        self.options = options
        self._latest: Optional[Offsets] = None
        self._available_now_target: Optional[Offsets] = None
        self._last_batch_planned_at = time.monotonic()

    def initialOffset(self) -> StreamOffset:
        opts, lookup = self.options, self.lookup
        tps = lookup.partitions(opts.subscription, must_exist=False)
        earliest, latest = lookup.earliest(tps), lookup.latest(tps)
        start = resolve_bound(opts.starting, tps, earliest, latest, lookup, False, opts.timestamp_strategy)
        return to_stream_offset(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.lookup.partitions(self.options.subscription, must_exist=False)
        self._available_now_target = self.lookup.latest(tps)

    def latestOffset(self, start: StreamOffset, limit: ReadLimit) -> StreamOffset:
        begin = self._current_start(from_stream_offset(start))
        stable = self.lookup.latest(list(begin))
        self._latest = stable
        if self._available_now_target is not None:
            target = self._available_now_target
            stable = {tp: min(lso, target.get(tp, begin[tp])) for tp, lso in stable.items()}
        # Offsets beyond the LSO are not readable yet; a start past it (a JSON start) waits.
        available = {tp: max(begin[tp], stable[tp]) for tp in begin}
        max_rows, min_rows = self._limits(limit)
        backlog = sum(available[tp] - begin[tp] for tp in begin)
        if min_rows is not None and backlog < min_rows:
            waited_ms = (time.monotonic() - self._last_batch_planned_at) * 1000
            if waited_ms < self.options.max_trigger_delay_ms:
                return to_stream_offset(begin)
        end = limit_offsets(begin, available, max_rows)
        if end != begin:
            self._last_batch_planned_at = time.monotonic()
        return to_stream_offset(end)

    def _limits(self, limit: ReadLimit) -> tuple[Optional[int], Optional[int]]:
        """(max, min) offsets for this batch. The engine passes one limit; the other configured
        bound applies too unless the engine asks for everything (e.g. Trigger.AvailableNow)."""
        if isinstance(limit, ReadMaxRows):
            return limit.max_rows, self.options.min_offsets_per_trigger
        if isinstance(limit, ReadMinRows):
            return self.options.max_offsets_per_trigger, limit.min_rows
        if not isinstance(limit, ReadAllAvailable):
            log.warning("kafka_eos ignores the read limit %r: Kafka offsets are neither files nor bytes", limit)
        return None, None

    def _current_start(self, start: Offsets) -> Offsets:
        """``start`` for the partitions that exist now: partitions added since are read from
        earliest; vanished ones follow failOnDataLoss."""
        tps = self.lookup.partitions(self.options.subscription, must_exist=False)
        vanished = sorted(set(start) - set(tps))
        if vanished:
            message = f"Partitions {', '.join(f'{t}-{p}' for t, p in vanished)} no longer exist (topic deleted?)."
            if self.options.fail_on_data_loss:
                raise KafkaEosDataLossError(message + " Set failOnDataLoss=false to go on without them.")
            log.warning("%s Going on without them (failOnDataLoss=false).", message)
        added = [tp for tp in tps if tp not in start]
        current = {tp: start[tp] for tp in tps if tp in start}
        current.update(self.lookup.earliest(added))
        return current

    def reportLatestOffset(self) -> Optional[StreamOffset]:
        return to_stream_offset(self._latest) if self._latest is not None else None

    def partitions(self, start: StreamOffset, end: StreamOffset) -> Sequence[InputPartition]:
        begin, finish = from_stream_offset(start), from_stream_offset(end)
        earliest = self.lookup.earliest(list(finish)) if finish else {}
        ranges = []
        for tp in sorted(finish):
            # A partition added after `start` was planned is read from its earliest offset.
            first = check_start_available(tp, begin.get(tp, earliest[tp]), earliest[tp], self.options.fail_on_data_loss)
            if finish[tp] > first:
                ranges.append(OffsetRange(tp[0], tp[1], first, finish[tp]))
        return split_ranges(ranges, self.options.min_partitions, self.options.max_records_per_partition)

    def commit(self, end: StreamOffset) -> None:
        """Spark's checkpoint owns the offsets; nothing is committed to Kafka by the source."""

    def stop(self) -> None:
        self._lookup = None
