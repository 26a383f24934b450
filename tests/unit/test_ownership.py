"""Who may commit an epoch on a prefix: replays, new queries, resets, batch jobs."""

from __future__ import annotations

import pytest

from spark_kafka_eos.write.log_record import EpochId, LogRecord
from spark_kafka_eos.write.ownership import Verdict, judge

Q1, Q2 = "query-1", "query-2"


def record(kind: str, epoch: EpochId, previous: EpochId | None = None) -> LogRecord:
    return LogRecord(kind, "p", str(epoch), previous_epoch_id=None if previous is None else str(previous))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "last, epoch, verdict",
    [
        (None, EpochId.stream(Q1, 0), Verdict.PROCEED),
        (record("complete", EpochId.stream(Q1, 3)), EpochId.stream(Q1, 4), Verdict.PROCEED),
        (record("decision", EpochId.stream(Q1, 3)), EpochId.stream(Q1, 3), Verdict.REPLAY),
        (record("complete", EpochId.stream(Q1, 3)), EpochId.stream(Q1, 3), Verdict.REPLAY),
        (record("complete", EpochId.stream(Q1, 3)), EpochId.stream(Q1, 2), Verdict.REFUSE),
        # The reported loss: a new query's batch 0 was taken for a replay of the old query's batch 0.
        (record("complete", EpochId.stream(Q1, 0)), EpochId.stream(Q2, 0), Verdict.REFUSE),
        (record("complete", EpochId.stream(Q1, 0)), EpochId.stream(Q2, 5), Verdict.REFUSE),
        (record("complete", EpochId.stream(Q1, 9)), EpochId.batch("w"), Verdict.REFUSE),
        # Records of the previous format name no query: never a replay of anything.
        (LogRecord("complete", "p", "stream:0"), EpochId.stream(Q1, 0), Verdict.REFUSE),
        (record("complete", EpochId.batch("w1")), EpochId.batch("w1"), Verdict.REPLAY),
        (record("complete", EpochId.batch("w1")), EpochId.batch("w2"), Verdict.PROCEED),
        (record("complete", EpochId.batch("w1")), EpochId.stream(Q1, 0), Verdict.PROCEED),
        (record("reset", EpochId("reset", "1"), EpochId.stream(Q1, 7)), EpochId.stream(Q2, 0), Verdict.PROCEED),
        (record("reset", EpochId("reset", "1"), EpochId.stream(Q1, 7)), EpochId.stream(Q1, 7), Verdict.REFUSE),
        (record("reset", EpochId("reset", "1"), EpochId.stream(Q1, 7)), EpochId.stream(Q1, 8), Verdict.PROCEED),
        (record("reset", EpochId("reset", "1")), EpochId.batch("w"), Verdict.PROCEED),
    ],
)
def test_judge(last: LogRecord | None, epoch: EpochId, verdict: Verdict) -> None:
    judgement = judge(last, epoch)
    assert judgement.verdict == verdict
    assert bool(judgement.reason) == (verdict == Verdict.REFUSE)


@pytest.mark.parametrize("epoch", [EpochId.stream("q-1:with:colons", 12), EpochId.batch("2026-11-22"), EpochId("reset", "17")])
def test_epoch_ids_round_trip(epoch: EpochId) -> None:
    assert EpochId.parse(str(epoch)) == epoch


def test_a_format_1_epoch_id_has_no_run() -> None:
    assert EpochId.parse("stream:7") == EpochId.stream("", 7)


def test_log_records_round_trip_with_probe_and_previous_owner() -> None:
    from spark_kafka_eos.write.log_record import Participant

    decision = LogRecord("decision", "p", str(EpochId.stream(Q1, 3)),
                         (Participant("p-0a1b2c3d-1-0-0", 5, 2, 0, (("t", 0, 10),), ("t", 0, 41)),), "g", (("in", 0, 9),))
    assert LogRecord.from_json(decision.to_json()) == decision
    reset = record("reset", EpochId("reset", "1"), EpochId.stream(Q1, 7))
    assert LogRecord.from_json(reset.to_json()).previous_epoch == EpochId.stream(Q1, 7)
