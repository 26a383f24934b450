"""Task transactional ids: bounded, apart per run and per generation, and claimed by exactly one prefix."""

from __future__ import annotations

from spark_kafka_eos._internal.decision_log.records import EpochId
from spark_kafka_eos._internal.write.transactional_id import (
    belongs_to_prefix,
    coordinator_transactional_id,
    parse_task_transactional_id,
    task_transactional_id,
)


def test_two_runs_on_one_prefix_never_share_an_id() -> None:
    first, second = EpochId.stream("query-1", 0), EpochId.stream("query-2", 0)
    assert task_transactional_id("p", first, 0, 0) != task_transactional_id("p", second, 0, 0)
    assert task_transactional_id("p", EpochId.batch("w1"), 3, 1) != task_transactional_id("p", EpochId.batch("w2"), 3, 1)


def test_consecutive_micro_batches_use_other_ids_and_ids_stay_bounded() -> None:
    ids = {task_transactional_id("p", EpochId.stream("q", batch), 2, 1) for batch in range(1000)}
    assert len(ids) == 2  # a straggler of batch N never holds an id of batch N + 1
    assert task_transactional_id("p", EpochId.stream("q", 4), 2, 1) != task_transactional_id("p", EpochId.stream("q", 5), 2, 1)


def test_a_restarted_query_reuses_its_ids() -> None:
    assert task_transactional_id("p", EpochId.stream("q", 6), 0, 0) == task_transactional_id("p", EpochId.stream("q", 8), 0, 0)


def test_prefix_membership() -> None:
    own = task_transactional_id("a", EpochId.stream("q", 1), 12, 3)
    parsed = parse_task_transactional_id("a", own)
    assert parsed is not None and (parsed.generation, parsed.spark_partition, parsed.attempt_number) == (1, 12, 3)
    assert belongs_to_prefix("a", own) and belongs_to_prefix("a", coordinator_transactional_id("a"))
    longer = task_transactional_id("a-1", EpochId.stream("q", 1), 0, 0)
    assert not belongs_to_prefix("a", longer) and belongs_to_prefix("a-1", longer)
    assert not belongs_to_prefix("a", "a-0-0") and not belongs_to_prefix("a", "a-coordinator-x")
