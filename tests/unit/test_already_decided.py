"""What a straggling task asks the decision log: is its epoch already decided (by itself or a later micro-batch)?"""

from __future__ import annotations

import pytest

from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord
from spark_kafka_eos._internal.write.ownership import already_decided

Q1, Q2 = "query-1", "query-2"


def record(kind: str, epoch: EpochId, previous: EpochId | None = None) -> LogRecord:
    return LogRecord(kind, "p", str(epoch), previous_epoch_id=None if previous is None else str(previous))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "last, epoch, decided",
    [
        (None, EpochId.stream(Q1, 3), False),
        (record("decision", EpochId.stream(Q1, 3)), EpochId.stream(Q1, 3), True),
        (record("complete", EpochId.stream(Q1, 3)), EpochId.stream(Q1, 3), True),
        (record("complete", EpochId.stream(Q1, 4)), EpochId.stream(Q1, 3), True),  # a later micro-batch of its run
        (record("complete", EpochId.stream(Q1, 3)), EpochId.stream(Q1, 4), False),
        (record("complete", EpochId.stream(Q2, 9)), EpochId.stream(Q1, 3), False),  # another query's: not this epoch's
        (record("complete", EpochId.batch("w")), EpochId.batch("w"), True),
        (record("complete", EpochId.batch("w")), EpochId.batch("w2"), False),
        (record("complete", EpochId.stream(Q1, 9)), EpochId.batch("w"), False),
        (record("complete", EpochId.batch("w")), EpochId.stream(Q1, 0), False),
        # A reset remembers what its query decided: that query's earlier micro-batches can never be decided again.
        (record("reset", EpochId("reset", "1"), EpochId.stream(Q1, 9)), EpochId.stream(Q1, 3), True),
        (record("reset", EpochId("reset", "1"), EpochId.stream(Q1, 3)), EpochId.stream(Q1, 3), True),
        (record("reset", EpochId("reset", "1"), EpochId.stream(Q1, 3)), EpochId.stream(Q1, 4), False),
        (record("reset", EpochId("reset", "1"), EpochId.stream(Q2, 3)), EpochId.stream(Q1, 3), False),
        # History: an earlier write id, however many jobs ran since.
        (LogRecord("complete", "p", "batch:d2", history=(("batch:d1", 1), ("batch:d2", 2))), EpochId.batch("d1"), True),
        (LogRecord("complete", "p", "batch:d2", history=(("batch:d1", 1), ("batch:d2", 2))), EpochId.batch("d3"), False),
    ],
)
def test_already_decided(last: LogRecord | None, epoch: EpochId, decided: bool) -> None:
    assert already_decided(last, epoch) is decided
