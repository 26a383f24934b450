"""Which transactional ids belong to a prefix: its task ids and its coordinator id, and no other prefix's."""

from __future__ import annotations

import pytest

from spark_kafka_eos._internal.decision_log.records import EpochId
from spark_kafka_eos._internal.write.transactional_id import (
    SLOT_STRIDE,
    belongs_to_prefix,
    coordinator_transactional_id,
    task_transactional_id,
    task_transactional_id_candidates,
)


@pytest.mark.parametrize("prefix", ["p", "orders-etl", "a.b", "kafka-eos-0123456789abcdef", "x_1"])
def test_every_id_a_prefix_uses_belongs_to_it(prefix: str) -> None:
    ids = [coordinator_transactional_id(prefix)]
    for epoch in (EpochId.stream("query-1", 0), EpochId.stream("query-2", 7), EpochId.batch("w")):
        for partition, attempt in ((0, 0), (11, 3), (250, 17)):
            ids += task_transactional_id_candidates(prefix, epoch, partition, attempt)
    assert all(belongs_to_prefix(prefix, txn_id) for txn_id in ids)


@pytest.mark.parametrize(
    "prefix, transactional_id",
    [
        ("a", task_transactional_id("a-1", EpochId.stream("q", 1), 0, 0)),  # a longer prefix's task id
        ("a", coordinator_transactional_id("a-1")),  # a longer prefix's coordinator
        ("a-1", coordinator_transactional_id("a")),
        ("a.b", task_transactional_id("axb", EpochId.stream("q", 1), 0, 0)),  # '.' is not a wildcard
        ("a", "a"),
        ("a", "a-"),
        ("a", "a-0-0"),  # the task id scheme of an older version
        ("a", "a-coordinator-x"),
        ("a", "a-0A1B2C3D-0-0-0"),  # run tags are lower-case hex
        ("a", "a-0a1b2c3-0-0-0"),  # 7 digits
        ("a", "a-0a1b2c3d-0-0-0-0"),
        ("a", "a-0a1b2c3d-0-x-0"),
        ("a", "b-0a1b2c3d-0-0-0"),
        ("a", ""),
    ],
)
def test_ids_of_other_prefixes_or_shapes_do_not_belong(prefix: str, transactional_id: str) -> None:
    assert not belongs_to_prefix(prefix, transactional_id)


def test_a_task_id_of_a_later_slot_still_belongs() -> None:
    epoch = EpochId.stream("q", 3)
    slotted = task_transactional_id("p", epoch, 2, 1, slot=3)
    assert slotted.endswith(f"-{1 + 3 * SLOT_STRIDE}") and belongs_to_prefix("p", slotted)
