"""Who may commit an epoch on a prefix: replays, new queries, resets, batch jobs."""

from __future__ import annotations

import pytest

from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord
from spark_kafka_eos._internal.write.coordinator import RecoveryReport
from spark_kafka_eos._internal.write.ownership import Verdict, judge
from spark_kafka_eos._internal.write.prefix_repair import reset_record

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
    from spark_kafka_eos._internal.decision_log.records import Participant

    decision = LogRecord("decision", "p", str(EpochId.stream(Q1, 3)),
                         (Participant("p-0a1b2c3d-1-0-0", 5, 2, 0, (("t", 0, 10),), ("t", 0, 41)),), "g", (("in", 0, 9),))
    assert LogRecord.from_json(decision.to_json()) == decision
    reset = record("reset", EpochId("reset", "1"), EpochId.stream(Q1, 7))
    assert LogRecord.from_json(reset.to_json()).previous_epoch == EpochId.stream(Q1, 7)


def test_a_write_id_whose_output_a_reset_accepted_as_partly_lost_is_refused_with_its_own_fix() -> None:
    reset = LogRecord("reset", "p", "reset:1", history=(("batch:w1", 1),), partly_lost=("batch:w1",))
    refused = judge(reset, EpochId.batch("w1"))
    assert refused.verdict == Verdict.REFUSE and "new writeId" in refused.fix
    assert judge(reset, EpochId.batch("w2")).verdict == Verdict.PROCEED


def test_a_reset_that_accepts_the_loss_of_all_of_an_epoch_forgets_it_and_of_part_of_it_refuses_it() -> None:
    decision = LogRecord("decision", "p", "batch:w1", history=(("batch:w0", 1), ("batch:w1", 2)))
    all_lost = reset_record(decision, RecoveryReport(decision, "lost", [], all_lost=True))
    assert judge(all_lost, EpochId.batch("w1")).verdict == Verdict.PROCEED  # a re-run writes it, once
    assert judge(all_lost, EpochId.batch("w0")).verdict == Verdict.REPLAY
    only = LogRecord("decision", "p", "batch:w1", history=(("batch:w1", 2),))
    assert judge(reset_record(only, RecoveryReport(only, "lost", [], all_lost=True)), EpochId.batch("w1")).verdict == Verdict.PROCEED
    partly = reset_record(decision, RecoveryReport(decision, "lost", [], all_lost=False))
    assert judge(partly, EpochId.batch("w1")).verdict == Verdict.REFUSE
    kept = reset_record(decision, RecoveryReport(decision, None, []))
    assert judge(kept, EpochId.batch("w1")).verdict == Verdict.REPLAY
