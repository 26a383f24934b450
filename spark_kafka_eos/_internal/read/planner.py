"""Offset planning: resolve starting and ending positions, and cut them into Spark partitions.

Pure arithmetic over what an :class:`OffsetLookup` reports from Kafka, so it is unit-tested
without a broker. "latest" is always the last stable offset (LSO) under read_committed: a plan
never reaches past an open transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from pyspark.sql.datasource import InputPartition

from spark_kafka_eos._internal.config.reader import EARLIEST, LATEST, OffsetBound, PartitionKey, Subscription
from spark_kafka_eos._internal.read.data_loss import describe, moved_back_problem, report_data_loss
from spark_kafka_eos.errors import KafkaEosOptionError

log = logging.getLogger(__name__)

Offsets = dict[PartitionKey, int]


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark input partition: offsets ``[start, end)`` of one Kafka partition."""

    topic: str
    partition: int
    start: int
    end: int
    topic_id: str | None = None
    """The topic's id when the range was planned (KIP-516); None: not known."""

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class PackedRanges(InputPartition):
    """One Spark input partition of several small ranges, each of another Kafka partition, read one after another."""

    ranges: tuple[OffsetRange, ...]

    @property
    def size(self) -> int:
        return sum(r.size for r in self.ranges)


def ranges_of(partition: OffsetRange | PackedRanges) -> tuple[OffsetRange, ...]:
    """The offset ranges a planned Spark partition reads, in order."""
    return partition.ranges if isinstance(partition, PackedRanges) else (partition,)


class OffsetLookup(Protocol):
    """What the planner needs to know from Kafka."""

    def partitions(self, subscription: Subscription, must_exist: bool) -> list[PartitionKey]: ...

    def earliest(self, partitions: Sequence[PartitionKey]) -> Offsets: ...

    def latest(self, partitions: Sequence[PartitionKey]) -> Offsets:
        """The LSO under read_committed, the high watermark under read_uncommitted."""
        ...

    def log_end(self, partitions: Sequence[PartitionKey]) -> Offsets:
        """The high watermark: where each partition's log ends, committed or not."""
        ...

    def for_timestamps(self, timestamps: Mapping[PartitionKey, int]) -> dict[PartitionKey, int | None]:
        """Earliest offset whose timestamp is >= the given one; None where there is none."""
        ...

    def committed(self, group: str, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int | None]:
        """The group's committed offsets; None where it has none."""
        ...

    def topic_ids(self, topics: Sequence[str]) -> dict[str, str]:
        """Each topic's id (KIP-516); a topic that does not exist is left out."""
        ...


def resolve_bound(
    bound: OffsetBound,
    partitions: Sequence[PartitionKey],
    earliest: Offsets,
    latest: Offsets,
    lookup: OffsetLookup,
    is_end: bool,
    timestamp_strategy: str = "error",
) -> Offsets:
    """Offsets of ``partitions`` for a starting (``is_end=False``) or ending position."""
    if bound.kind == "earliest":
        return {tp: earliest[tp] for tp in partitions}
    if bound.kind == "latest":
        return {tp: latest[tp] for tp in partitions}
    if bound.kind == "group":
        assert bound.group is not None
        # Not clamped to the end: a committed offset past the log end is data loss (a re-created
        # or truncated topic), which the callers report as for any other position.
        committed = lookup.committed(bound.group, partitions)
        return {tp: _or(committed.get(tp), earliest[tp]) for tp in partitions}
    if bound.kind == "offsets":
        _require_exact_partitions(bound, set(bound.offsets), partitions)
        return {
            tp: earliest[tp] if bound.offsets[tp] == EARLIEST else latest[tp] if bound.offsets[tp] == LATEST else bound.offsets[tp]
            for tp in partitions
        }
    if bound.kind == "timestamp":
        assert bound.timestamp is not None
        wanted = {tp: bound.timestamp for tp in partitions}
    else:
        _require_exact_partitions(bound, set(bound.timestamps), partitions)
        wanted = dict(bound.timestamps)
    found = lookup.for_timestamps(wanted) if wanted else {}
    resolved: Offsets = {}
    for tp in partitions:
        offset = found.get(tp)
        if offset is None and not is_end and timestamp_strategy == "error":
            raise KafkaEosOptionError(
                bound.option,
                f"no record of {tp[0]}-{tp[1]} has a timestamp at or after {wanted[tp]}.",
                "use an earlier timestamp, or set startingOffsetsByTimestampStrategy=latest to start such partitions at latest.",
            )
        # No record at or after the timestamp: the position is the end of the partition.
        resolved[tp] = latest[tp] if offset is None else min(offset, latest[tp])
    return resolved


def _require_exact_partitions(bound: OffsetBound, given: set[PartitionKey], partitions: Sequence[PartitionKey]) -> None:
    known = set(partitions)
    unknown = sorted(given - known)
    if unknown:
        raise KafkaEosOptionError(
            bound.option,
            f"names {', '.join(f'{t}-{p}' for t, p in unknown)}, which the query does not read (no such partition, or not subscribed).",
            "name only existing partitions of the subscribed topics.",
        )
    missing = sorted(known - given)
    if missing:
        raise KafkaEosOptionError(
            bound.option,
            f"has no position for {', '.join(f'{t}-{p}' for t, p in missing)}.",
            "give every partition of the subscribed topics; use -2 for earliest and -1 for latest.",
        )


def plan_batch(
    partitions: Sequence[PartitionKey],
    starting: OffsetBound,
    ending: OffsetBound,
    earliest: Offsets,
    latest: Offsets,
    lookup: OffsetLookup,
    fail_on_data_loss: bool,
    timestamp_strategy: str = "error",
) -> list[OffsetRange]:
    """The offset ranges of a batch read, never past the LSO taken now."""
    start = resolve_bound(starting, partitions, earliest, latest, lookup, False, timestamp_strategy)
    end = resolve_bound(ending, partitions, earliest, latest, lookup, True)
    beyond = [tp for tp in partitions if start[tp] > latest[tp]]
    if beyond:
        start.update(restart_moved_back(start, lookup.log_end(beyond), earliest, fail_on_data_loss))
    if starting.kind == "group":
        # A group offset inside an open transaction (committed by a read_uncommitted consumer):
        # nothing at or after it is stable yet, so this read has nothing of the partition.
        start.update({tp: latest[tp] for tp in partitions if start[tp] > latest[tp]})
    ranges = []
    for tp in sorted(partitions):
        s, e = start[tp], end[tp]
        if e > latest[tp]:
            raise KafkaEosOptionError(
                ending.option,
                f"ends {tp[0]}-{tp[1]} at offset {e}, but only offsets below {latest[tp]} are stable "
                "(the last stable offset: beyond it lie open transactions or records not yet written).",
                "end at latest, or at an offset <= the last stable offset.",
            )
        s = check_start_available(tp, s, earliest[tp], fail_on_data_loss)
        if s > e:
            raise KafkaEosOptionError(
                starting.option,
                f"starts {tp[0]}-{tp[1]} at offset {s}, after its end {e} ({ending.option}).",
                "choose a starting position at or before the ending position.",
            )
        ranges.append(OffsetRange(tp[0], tp[1], s, e))
    return ranges


def restart_moved_back(position: Offsets, log_end: Offsets, earliest: Offsets, fail_on_data_loss: bool,
                       truncated: Collection[PartitionKey] = ()) -> Offsets:
    """For each partition of ``log_end`` whose log now ends below ``position`` (topic re-created,
    log truncated, a checkpointed or given offset past the end): a data-loss error, or with
    failOnDataLoss=false its earliest offset, so that the records it holds now are read. A partition of
    ``truncated`` (its topic's id unchanged since the query read up to ``position``: its log was cut back, an
    unclean leader election) goes on from where its log now ends instead: the query read what lies below."""
    restarted: Offsets = {}
    for tp in sorted(log_end):
        if log_end[tp] < position[tp]:
            if tp in truncated:
                report_data_loss(
                    f"{moved_back_problem(tp, position[tp], log_end[tp])} Its topic's id is the one the query read up to "
                    f"offset {position[tp]}: its log was truncated, and records the query read below offset "
                    f"{position[tp]} are gone from it, at least those of offsets {log_end[tp]} to {position[tp] - 1} (records "
                    f"written since the truncation below offset {log_end[tp]}, if any, are not read).", fail_on_data_loss,
                    f"Reading {describe(tp)} on from the truncation point, offset {log_end[tp]} (what lies below it "
                    "was read before)",
                )
                restarted[tp] = log_end[tp]
                continue
            report_data_loss(
                moved_back_problem(tp, position[tp], log_end[tp]), fail_on_data_loss,
                f"Reading {describe(tp)} again from its earliest offset {earliest[tp]}",
            )
            restarted[tp] = earliest[tp]
    return restarted


def check_start_available(tp: PartitionKey, start: int, earliest: int, fail_on_data_loss: bool) -> int:
    """``start``, or the earliest available offset when retention deleted it and data loss is allowed."""
    if start >= earliest:
        return start
    one = start == earliest - 1
    report_data_loss(
        f"{describe(tp)}: {deleted_offsets(start, earliest)} (retention or deleteRecords) before "
        f"{'it was' if one else 'they were'} read; the earliest available offset is {earliest}.",
        fail_on_data_loss, f"Skipping {'it' if one else 'them'} and reading on from offset {earliest}",
    )
    return earliest


def deleted_offsets(start: int, earliest: int) -> str:
    """``offsets start to earliest - 1 were deleted`` (``offset start was deleted`` when that is one): what a
    log start at ``earliest`` deleted below a position ``start``. A log start at or below the position deleted
    nothing the query still needs, which is no data loss to name: a ValueError, never a backwards range."""
    if earliest <= start:
        raise ValueError(f"a log starting at offset {earliest} deleted nothing at or after offset {start}")
    return f"offset {start} was deleted" if start == earliest - 1 else f"offsets {start} to {earliest - 1} were deleted"


def split_ranges(
    ranges: Sequence[OffsetRange], min_partitions: int | None, max_records_per_partition: int | None
) -> list[OffsetRange]:
    """Drop empty ranges, cut ranges longer than ``max_records_per_partition``, then cut them
    further, in proportion to their sizes, until there are ``min_partitions``."""
    pieces = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        pieces = [
            piece for r in pieces for piece in _cut(r, -(-r.size // max_records_per_partition))
        ]
    if min_partitions and len(pieces) < min_partitions:
        parts = _share_parts([r.size for r in pieces], min_partitions)
        pieces = [piece for r, n in zip(pieces, parts) for piece in _cut(r, n)]
    return pieces


def plan_partitions(
    ranges: Sequence[OffsetRange], min_partitions: int | None, max_records_per_partition: int | None,
    min_records_per_partition: int,
) -> list[OffsetRange | PackedRanges]:
    """The Spark partitions of ``ranges``: cut as ``minPartitions`` and ``maxRecordsPerPartition`` ask
    (:func:`split_ranges`); when neither is set, small ranges packed (:func:`pack_ranges`)."""
    if min_partitions or max_records_per_partition:
        return list(split_ranges(ranges, min_partitions, max_records_per_partition))
    return pack_ranges([r for r in ranges if r.size > 0], min_records_per_partition)


def pack_ranges(ranges: Sequence[OffsetRange], min_records: int) -> list[OffsetRange | PackedRanges]:
    """Ranges of fewer than ``min_records`` offsets, in (topic, partition) order, packed together into
    Spark partitions of up to ``min_records`` offsets; larger ranges stay alone. ``min_records`` 0: one Spark
    partition per range, as Spark's source plans. A Kafka partition's range is never split across packs, so
    its records keep their order in one task."""
    if min_records <= 0:
        return list(ranges)
    planned: list[OffsetRange | PackedRanges] = []
    pack: list[OffsetRange] = []
    packed = 0  # offsets in ``pack``

    def close_pack() -> None:
        nonlocal packed
        if pack:
            planned.append(pack[0] if len(pack) == 1 else PackedRanges(tuple(pack)))
            pack.clear()
            packed = 0

    for r in sorted(ranges, key=lambda r: (r.topic, r.partition, r.start)):
        if r.size >= min_records:
            planned.append(r)
            continue
        if packed + r.size > min_records:
            close_pack()
        pack.append(r)
        packed += r.size
    close_pack()
    return planned


def _share_parts(sizes: Sequence[int], wanted: int) -> list[int]:
    """How many pieces to cut each range into: ``wanted`` in total when the offsets allow (and there are
    at most ``wanted`` ranges), in proportion to size, at least one each and never more than a range's size.
    A range whose share is below one still gets its piece: the ranges furthest above their shares give
    those back, so the total is never above ``wanted``."""
    total = sum(sizes)
    shares = [wanted * size / total for size in sizes]
    parts = [min(size, max(1, int(share))) for size, share in zip(sizes, shares)]
    while sum(parts) > wanted:
        over = [i for i in range(len(parts)) if parts[i] > 1]
        if not over:
            break
        parts[max(over, key=lambda i: parts[i] - shares[i])] -= 1
    while sum(parts) < wanted:
        room = [i for i, size in enumerate(sizes) if parts[i] < size]
        if not room:
            break
        parts[max(room, key=lambda i: shares[i] - parts[i])] += 1
    return parts


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``r`` cut into ``parts`` contiguous ranges whose sizes differ by at most one."""
    parts = max(1, min(parts, r.size))
    base, extra = divmod(r.size, parts)
    out, start = [], r.start
    for i in range(parts):
        end = start + base + (1 if i < extra else 0)
        out.append(replace(r, start=start, end=end))
        start = end
    return out


def limit_offsets(start: Offsets, available_end: Offsets, max_offsets: int | None) -> Offsets:
    """End offsets that advance at most ``max_offsets`` in total, shared among partitions in
    proportion to their backlog. As in Spark, every partition with a backlog moves at least one
    offset, so a small partition never starves behind a large one; unlike Spark, the largest
    shares give those offsets back, so the total exceeds ``max_offsets`` only when it is smaller
    than the number of partitions with a backlog. Rounding left over goes to the largest remainders."""
    backlog = {tp: max(0, available_end[tp] - start.get(tp, available_end[tp])) for tp in available_end}
    total = sum(backlog.values())
    if max_offsets is None or total <= max_offsets:
        return {tp: start.get(tp, end) + backlog[tp] for tp, end in available_end.items()}
    shares = {tp: max_offsets * size / total for tp, size in backlog.items()}
    granted = {tp: max(1, int(share)) if backlog[tp] else 0 for tp, share in shares.items()}
    for _ in range(sum(granted.values()) - max_offsets):
        largest = max(granted, key=lambda t: (granted[t], backlog[t]))
        if granted[largest] <= 1:
            break
        granted[largest] -= 1
    leftover = max(0, max_offsets - sum(granted.values()))
    for tp in sorted(shares, key=lambda t: (shares[t] - granted[t], backlog[t]), reverse=True)[:leftover]:
        granted[tp] += 1
    return {tp: start.get(tp, end) + min(granted[tp], backlog[tp]) for tp, end in available_end.items()}


def _or(offset: int | None, default: int) -> int:
    return default if offset is None else offset
