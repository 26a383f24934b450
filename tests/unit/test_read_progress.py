"""The stall rule of a range read: the position or the fetch offset must move."""

import json

from spark_kafka_eos._internal.read.progress import FetchProgress, StallWatch, statistics_interval_ms


def test_a_moving_fetch_offset_is_progress_while_the_position_stands() -> None:
    # A long run of aborted records: nothing delivered, position() unchanged, the fetcher moves.
    watch = StallWatch(limit_s=2.0, now=0.0)
    assert not watch.stalled(position=10, fetch_offset=-1, now=0.0)
    for second, fetch_offset in enumerate(range(1000, 6000, 1000), start=1):
        assert not watch.stalled(position=10, fetch_offset=fetch_offset, now=float(second))
    assert not watch.stalled(position=10, fetch_offset=5000, now=6.9)
    assert watch.stalled(position=10, fetch_offset=5000, now=7.1)


def test_nothing_moving_is_a_stall_after_the_limit() -> None:
    watch = StallWatch(limit_s=2.0, now=0.0)
    assert not watch.stalled(position=10, fetch_offset=20, now=0.5)
    assert not watch.stalled(position=10, fetch_offset=20, now=2.4)
    assert watch.stalled(position=10, fetch_offset=20, now=2.6)
    # A position further on restarts the clock; going back does not count as progress.
    assert not watch.stalled(position=11, fetch_offset=20, now=3.0)
    assert watch.stalled(position=9, fetch_offset=19, now=5.1)


def test_fetch_progress_reads_the_partitions_next_offset() -> None:
    progress = FetchProgress("t", 3)
    progress.on_statistics(json.dumps({"topics": {"t": {"partitions": {"3": {"next_offset": 42}, "-1": {}}}}}))
    assert progress.next_offset == 42
    progress.on_statistics(json.dumps({"topics": {}}))  # a report before the partition is known
    progress.on_statistics("not json")
    progress.on_statistics(json.dumps({"topics": {"t": {"partitions": {"3": {"next_offset": 40}}}}}))
    assert progress.next_offset == 42


def test_statistics_come_several_times_within_the_stall_limit() -> None:
    assert statistics_interval_ms(120_000) == 1000
    assert statistics_interval_ms(2_000) == 200
    assert statistics_interval_ms(500) == 100
