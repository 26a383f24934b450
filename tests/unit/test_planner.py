"""Offset planning arithmetic: pure logic, no broker."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from spark_kafka_eos._internal.config.reader import OffsetBound, PartitionKey, Subscription
from spark_kafka_eos._internal.read.planner import (
    OffsetRange,
    PackedRanges,
    check_start_available,
    deleted_offsets,
    limit_offsets,
    pack_ranges,
    plan_batch,
    plan_partitions,
    resolve_bound,
    restart_moved_back,
    split_ranges,
)
from spark_kafka_eos.errors import KafkaEosDataLossError, KafkaEosOptionError

A0, A1 = ("a", 0), ("a", 1)


class FakeLookup:
    """Timestamps index: offset = timestamp // 10, below `latest`; None past it."""

    def __init__(self, latest: Mapping[PartitionKey, int], log_end: Mapping[PartitionKey, int] | None = None) -> None:
        self._latest = latest
        self._log_end = log_end or latest

    def partitions(self, subscription: Subscription, must_exist: bool) -> list[PartitionKey]:
        return sorted(self._latest)

    def earliest(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        return {tp: 0 for tp in partitions}

    def latest(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        return {tp: self._latest[tp] for tp in partitions}

    def log_end(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        return {tp: self._log_end[tp] for tp in partitions}

    def for_timestamps(self, timestamps: Mapping[PartitionKey, int]) -> dict[PartitionKey, int | None]:
        return {tp: (ts // 10 if ts // 10 < self._latest[tp] else None) for tp, ts in timestamps.items()}

    def committed(self, group: str, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int | None]:
        return {A0: 42} if group == "g" else {}


EARLIEST = {A0: 0, A1: 0}
LATEST = {A0: 100, A1: 50}
LOOKUP = FakeLookup(LATEST)


def bound(kind: str, **kwargs: object) -> OffsetBound:
    return OffsetBound(kind, "startingOffsets" if kwargs.pop("start", True) else "endingOffsets", **kwargs)  # type: ignore[arg-type]


def plan(
    starting: OffsetBound, ending: OffsetBound, earliest: Mapping[PartitionKey, int] = EARLIEST, fail: bool = True,
    lookup: FakeLookup = LOOKUP,
) -> list[OffsetRange]:
    return plan_batch([A0, A1], starting, ending, dict(earliest), dict(LATEST), lookup, fail)


def test_earliest_to_latest_is_bounded_by_the_lso() -> None:
    assert plan(bound("earliest"), bound("latest", start=False)) == [OffsetRange("a", 0, 0, 100), OffsetRange("a", 1, 0, 50)]


def test_json_offsets_with_earliest_and_latest_markers() -> None:
    ranges = plan(bound("offsets", offsets={A0: 10, A1: -2}), bound("offsets", start=False, offsets={A0: -1, A1: 20}))
    assert ranges == [OffsetRange("a", 0, 10, 100), OffsetRange("a", 1, 0, 20)]


def test_json_offsets_must_name_every_partition_and_only_existing_ones() -> None:
    with pytest.raises(KafkaEosOptionError, match="no position for a-1"):
        plan(bound("offsets", offsets={A0: 1}), bound("latest", start=False))
    with pytest.raises(KafkaEosOptionError, match="a-7"):
        plan(bound("offsets", offsets={A0: 1, A1: 1, ("a", 7): 1}), bound("latest", start=False))


def test_an_end_past_the_lso_is_refused() -> None:
    with pytest.raises(KafkaEosOptionError, match="only offsets below 50 are stable"):
        plan(bound("earliest"), bound("offsets", start=False, offsets={A0: 100, A1: 51}))


def test_a_start_after_the_end_is_refused() -> None:
    with pytest.raises(KafkaEosOptionError, match="after its end"):
        plan(bound("offsets", offsets={A0: 60, A1: 0}), bound("offsets", start=False, offsets={A0: 50, A1: 50}))


def test_a_start_past_the_log_end_is_data_loss_and_restarts_at_earliest() -> None:
    # a-0 holds 100 offsets; a start at 120 lies past its log (a re-created topic, a truncated log).
    starting, ending = bound("offsets", offsets={A0: 120, A1: 0}), bound("latest", start=False)
    with pytest.raises(KafkaEosDataLossError, match=r"a-0 .*stands at offset 120, but .* ends at offset 100.*failOnDataLoss=false"):
        plan(starting, ending)
    assert plan(starting, ending, fail=False)[0] == OffsetRange("a", 0, 0, 100)
    # Past the LSO but inside the log (an open transaction): not data loss, an option error.
    inside = FakeLookup(LATEST, log_end={A0: 130, A1: 50})
    with pytest.raises(KafkaEosOptionError, match="after its end"):
        plan(starting, ending, fail=False, lookup=inside)


def test_restart_moved_back_only_touches_partitions_below_the_position() -> None:
    assert restart_moved_back({A0: 50, A1: 5}, {A0: 20, A1: 5}, {A0: 3, A1: 0}, False) == {A0: 3}
    with pytest.raises(KafkaEosDataLossError, match="a-0 .*offset 50.*offset 20"):
        restart_moved_back({A0: 50, A1: 5}, {A0: 20, A1: 5}, {A0: 3, A1: 0}, True)


def test_deleted_offsets_follow_fail_on_data_loss() -> None:
    starting, ending, earliest = bound("offsets", offsets={A0: 0, A1: 0}), bound("latest", start=False), {A0: 10, A1: 0}
    with pytest.raises(KafkaEosDataLossError, match="a-0: offsets 0 to 9 were deleted"):
        plan(starting, ending, earliest=earliest)
    assert plan(starting, ending, earliest=earliest, fail=False)[0] == OffsetRange("a", 0, 10, 100)


def test_timestamps_resolve_and_strategy_applies() -> None:
    # Timestamp 200 -> offset 20 in a-0; a-1 (latest 50) has offset 20 too.
    assert resolve_bound(bound("timestamp", timestamp=200), [A0, A1], EARLIEST, LATEST, LOOKUP, False) == {A0: 20, A1: 20}
    # Timestamp 700: a-1 has no record at or after it.
    with pytest.raises(KafkaEosOptionError, match="startingOffsetsByTimestampStrategy"):
        resolve_bound(bound("timestamp", timestamp=700), [A0, A1], EARLIEST, LATEST, LOOKUP, False)
    assert resolve_bound(bound("timestamp", timestamp=700), [A0, A1], EARLIEST, LATEST, LOOKUP, False, "latest") == {A0: 70, A1: 50}
    # As an end, "no record after it" means the end of the partition.
    assert resolve_bound(bound("timestamp", start=False, timestamp=700), [A0, A1], EARLIEST, LATEST, LOOKUP, True) == {A0: 70, A1: 50}


def test_group_offsets_start_where_the_group_stopped_else_earliest() -> None:
    assert resolve_bound(OffsetBound("group", "startingOffsets", group="g"), [A0, A1], EARLIEST, LATEST, LOOKUP, False) == {A0: 42, A1: 0}


def test_max_records_per_partition_cuts_evenly() -> None:
    pieces = split_ranges([OffsetRange("a", 0, 0, 10)], None, 4)
    assert [(p.start, p.end) for p in pieces] == [(0, 4), (4, 7), (7, 10)]


def test_min_partitions_is_met_in_proportion_and_ranges_stay_contiguous() -> None:
    ranges = [OffsetRange("a", 0, 0, 90), OffsetRange("a", 1, 0, 10), OffsetRange("a", 2, 5, 5)]
    pieces = split_ranges(ranges, 7, None)
    assert len(pieces) == 7
    assert sum(1 for p in pieces if p.partition == 0) == 6
    for partition, (lo, hi) in {0: (0, 90), 1: (0, 10)}.items():
        own = [p for p in pieces if p.partition == partition]
        assert own[0].start == lo and own[-1].end == hi
        assert all(a.end == b.start for a, b in zip(own, own[1:]))


def test_min_partitions_never_makes_empty_pieces() -> None:
    assert len(split_ranges([OffsetRange("a", 0, 0, 3)], 10, None)) == 3
    assert split_ranges([], 10, None) == []


def test_min_partitions_is_exact_when_small_ranges_are_lifted_to_one_piece() -> None:
    """Ranges too small for a share of their own still get one piece each; the large ranges give those
    pieces back, so there are exactly minPartitions (Spark's calculator gives 4 here too; before: 5)."""
    ranges = [OffsetRange("a", 0, 0, 1), OffsetRange("a", 1, 0, 1), OffsetRange("a", 2, 0, 1000)]
    pieces = split_ranges(ranges, 4, None)
    assert [(p.partition, p.start, p.end) for p in pieces] == [(0, 0, 1), (1, 0, 1), (2, 0, 500), (2, 500, 1000)]
    for sizes, wanted in [([1] * 5 + [10**6], 8), ([3, 1, 1, 1, 100], 7), ([1, 2, 3], 6), ([7, 1], 2)]:
        pieces = split_ranges([OffsetRange("a", i, 0, n) for i, n in enumerate(sizes)], wanted, None)
        assert len(pieces) == wanted, (sizes, wanted)


def test_min_partitions_is_a_minimum_not_a_target() -> None:
    """As in Spark: as many ranges as minPartitions or more (Kafka partitions with new offsets, or pieces cut
    by maxRecordsPerPartition) are left as they are; fewer offsets than minPartitions give fewer pieces."""
    ranges = [OffsetRange("a", p, 0, 10) for p in range(5)]
    assert len(split_ranges(ranges, 3, None)) == 5
    assert len(split_ranges([OffsetRange("a", 0, 0, 100)], 3, 10)) == 10
    assert len(split_ranges([OffsetRange("a", 0, 0, 2)], 3, None)) == 2


def test_a_data_loss_message_names_the_deleted_offsets_forwards() -> None:
    assert deleted_offsets(3, 6) == "offsets 3 to 5 were deleted"
    assert deleted_offsets(5, 6) == "offset 5 was deleted"
    for start, earliest in [(6, 6), (9, 6)]:
        with pytest.raises(ValueError):
            deleted_offsets(start, earliest)
        assert check_start_available(A0, start, earliest, fail_on_data_loss=True) == start
    with pytest.raises(KafkaEosDataLossError, match=r"a-0: offset 5 was deleted .* earliest available offset is 6"):
        check_start_available(A0, 5, 6, fail_on_data_loss=True)
    with pytest.raises(KafkaEosDataLossError, match=r"a-0: offsets 2 to 5 were deleted"):
        check_start_available(A0, 2, 6, fail_on_data_loss=True)


def test_limit_offsets_shares_the_budget_by_backlog() -> None:
    end = limit_offsets({A0: 0, A1: 0}, {A0: 90, A1: 10}, 10)
    assert end == {A0: 9, A1: 1}
    assert sum(end.values()) == 10
    assert limit_offsets({A0: 0, A1: 0}, {A0: 90, A1: 10}, None) == {A0: 90, A1: 10}
    # A small partition is never starved by a large one: it moves at least one offset, as in Spark.
    assert limit_offsets({A0: 0, A1: 0}, {A0: 1000, A1: 3}, 10) == {A0: 9, A1: 1}
    # That offset comes out of the largest share: the total stays within the maximum (Spark's may not).
    three = {A0: 0, A1: 0, ("a", 2): 0}
    assert limit_offsets(three, {A0: 60, A1: 1, ("a", 2): 1}, 10) == {A0: 8, A1: 1, ("a", 2): 1}
    # Only a maximum below the number of partitions with a backlog is exceeded: one offset each.
    assert limit_offsets(three, {A0: 60, A1: 1, ("a", 2): 1}, 2) == {A0: 1, A1: 1, ("a", 2): 1}
    # A start past the available end (waiting on an open transaction) never moves backwards.
    assert limit_offsets({A0: 95, A1: 0}, {A0: 95, A1: 10}, 5) == {A0: 95, A1: 5}


def test_small_ranges_are_packed_in_partition_order_and_large_ones_stay_alone() -> None:
    ranges = [OffsetRange("b", 0, 0, 4), OffsetRange("a", 1, 10, 13), OffsetRange("a", 0, 0, 50), OffsetRange("a", 2, 5, 9),
              OffsetRange("a", 3, 0, 2)]
    assert pack_ranges(ranges, 10) == [
        OffsetRange("a", 0, 0, 50),
        PackedRanges((OffsetRange("a", 1, 10, 13), OffsetRange("a", 2, 5, 9), OffsetRange("a", 3, 0, 2))),
        OffsetRange("b", 0, 0, 4),
    ]
    packed = pack_ranges(ranges, 10)
    assert sum(p.size for p in packed) == sum(r.size for r in ranges)
    # Every range is in exactly one Spark partition, whole.
    assert sorted((r for p in packed for r in (p.ranges if isinstance(p, PackedRanges) else (p,))), key=str) == sorted(ranges, key=str)


def test_zero_keeps_one_spark_partition_per_range_as_spark_does() -> None:
    ranges = [OffsetRange("a", p, 0, 3) for p in range(4)]
    assert pack_ranges(ranges, 0) == ranges


def test_min_partitions_or_max_records_per_partition_cut_and_never_pack() -> None:
    ranges = [OffsetRange("a", 0, 0, 40), OffsetRange("a", 1, 0, 2)]
    assert plan_partitions(ranges, None, 10, 10_000) == split_ranges(ranges, None, 10)
    assert plan_partitions(ranges, 6, None, 10_000) == split_ranges(ranges, 6, None)
    assert plan_partitions(ranges + [OffsetRange("a", 2, 5, 5)], None, None, 10_000) == [PackedRanges(tuple(ranges))]
