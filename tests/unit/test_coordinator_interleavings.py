"""The coordinator's protocol under interleavings that are hard to time on a real cluster: other
drivers, stragglers, failures around the decision. The seams are fakes (tests/unit/fakes.py); the
same scenarios' end results are checked on a real broker in tests/integration/write/test_epoch_identity.py."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

import pytest

from spark_kafka_eos._internal.decision_log import records as log_record
from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord, Participant
from spark_kafka_eos._internal.txn.session import TxnDescription, TxnState
from spark_kafka_eos._internal.write.commit_message import TaskCommit
from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
from spark_kafka_eos._internal.write.ownership import Verdict
from spark_kafka_eos._internal.write.transactional_id import task_transactional_id
from spark_kafka_eos.errors import (
    KafkaEosCommittedDataLostError,
    KafkaEosDecisionLogError,
    KafkaEosEpochAbortedError,
    KafkaEosEpochCommittedError,
    KafkaEosRunRefusedError,
)
from tests.harness.faults import AbortAfterDecision
from tests.unit.fakes import TIMEOUT_MS, Cluster, FakeSession, fake_seams, options

PREFIX = "p"
Q1, Q2 = "query-1", "query-2"


def coordinator(cluster: Cluster) -> TwoPhaseCommitCoordinator:
    return TwoPhaseCommitCoordinator(options(PREFIX), TIMEOUT_MS, **fake_seams(cluster))


def task(cluster: Cluster, epoch: EpochId, partition: int, attempt: int = 0, started_ms: int | None = None) -> TaskCommit:
    txn = cluster.open_transaction(task_transactional_id(PREFIX, epoch, partition, attempt), started_ms)
    return TaskCommit(str(epoch), partition, attempt, 100 + partition, txn, (("out", partition, 10),), (), ("out", partition, 0))


def committed(cluster: Cluster, *tasks: TaskCommit) -> bool:
    return all(t.transaction is not None and cluster.state(t.transaction.transactional_id) == TxnState.COMPLETE_COMMIT for t in tasks)


def aborted(cluster: Cluster, *tasks: TaskCommit) -> bool:
    return all(t.transaction is not None and cluster.state(t.transaction.transactional_id) == TxnState.COMPLETE_ABORT for t in tasks)


def test_micro_batches_of_one_query_commit_in_turn_and_a_replay_is_not_decided_again() -> None:
    cluster = Cluster()
    first = [task(cluster, EpochId.stream(Q1, 0), p) for p in (0, 1)]
    coordinator(cluster).commit(EpochId.stream(Q1, 0), first)
    replay = [task(cluster, EpochId.stream(Q1, 0), p, attempt=1) for p in (0, 1)]
    coordinator(cluster).commit(EpochId.stream(Q1, 0), replay)
    second = [task(cluster, EpochId.stream(Q1, 1), p) for p in (0, 1)]
    coordinator(cluster).commit(EpochId.stream(Q1, 1), second)
    assert committed(cluster, *first, *second) and aborted(cluster, *replay)
    assert [(r.kind, r.epoch_id) for r in cluster.records if r.kind == "decision"] == [
        ("decision", f"stream:{Q1}:0"), ("decision", f"stream:{Q1}:1")]


def test_a_new_query_on_a_prefix_owned_by_another_is_refused_before_it_fences_the_owner() -> None:
    cluster = Cluster()
    coordinator(cluster).commit(EpochId.stream(Q1, 0), [task(cluster, EpochId.stream(Q1, 0), 0)])
    fences = cluster.coordinator_epoch
    newcomer = task(cluster, EpochId.stream(Q2, 0), 0)
    with pytest.raises(KafkaEosRunRefusedError, match=f"owned by another streaming query.*{Q1}.*kafka-eos reset"):
        coordinator(cluster).commit(EpochId.stream(Q2, 0), [newcomer])
    assert aborted(cluster, newcomer)
    assert cluster.coordinator_epoch == fences  # the owner's coordinator was not fenced
    assert cluster.last(PREFIX) is not None and cluster.last(PREFIX).epoch == EpochId.stream(Q1, 0)  # type: ignore[union-attr]


def test_a_failed_phase_2_is_retried_and_the_epoch_commits() -> None:
    cluster = Cluster(transient_commit_failures=3)
    tasks = [task(cluster, EpochId.stream(Q1, 0), p) for p in (0, 1)]
    coordinator(cluster).commit(EpochId.stream(Q1, 0), tasks)
    assert committed(cluster, *tasks)
    assert cluster.last(PREFIX).kind == "complete"  # type: ignore[union-attr]


class _DescribesAfterDecision(FakeSession):
    """Records which ids the committing thread describes once the decision is written (the sweep's listing, beside
    phase 2 on a thread of its own, describes the open ones it lists)."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        self.described: list[str] = []

    def describe(self, ids: Iterable[str]) -> dict[str, TxnDescription]:
        ids = list(ids)
        if any(r.kind == "decision" for r in self.cluster.records) and threading.current_thread() is threading.main_thread():
            self.described += [i for i in ids if not i.endswith("-coordinator")]
        return super().describe(ids)


def test_phase_2_of_its_own_decision_commits_each_participant_without_describing_it_first() -> None:
    cluster = Cluster()
    session = _DescribesAfterDecision(cluster)
    tasks = [task(cluster, EpochId.stream(Q1, 0), p) for p in (0, 1, 2)]
    seams = fake_seams(cluster)
    seams["session_of"] = lambda connection: session
    TwoPhaseCommitCoordinator(options(PREFIX), TIMEOUT_MS, **seams).commit(EpochId.stream(Q1, 0), tasks)
    assert committed(cluster, *tasks)
    assert session.described == []  # the participants were seen open right before the decision


@pytest.mark.parametrize("fence", [False, True], ids=["aborted", "fenced"])
def test_a_participant_aborted_between_the_check_and_phase_2_is_still_reported_lost(fence: bool) -> None:
    cluster = Cluster()
    tasks = [task(cluster, EpochId.stream(Q1, 0), p) for p in (0, 1)]
    seams = fake_seams(cluster)
    commit = TwoPhaseCommitCoordinator(options(PREFIX), TIMEOUT_MS, AbortAfterDecision(tasks[1].transaction, fence), **seams)  # type: ignore[arg-type]
    with pytest.raises(KafkaEosCommittedDataLostError, match=f"LOST: {tasks[1].transaction.transactional_id}"):  # type: ignore[union-attr]
        commit.commit(EpochId.stream(Q1, 0), tasks)
    assert committed(cluster, tasks[0]) and aborted(cluster, tasks[1])


def test_a_committed_epoch_does_not_fail_when_its_completion_record_cannot_be_written(caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster(failing_appends={"complete": KafkaEosDecisionLogError("log unavailable")})
    tasks = [task(cluster, EpochId.batch("job-1"), p) for p in (0, 1)]
    with caplog.at_level(logging.WARNING):
        coordinator(cluster).commit(EpochId.batch("job-1"), tasks)  # a failure here would make an orchestrator re-run it
    assert committed(cluster, *tasks)
    assert "is committed, but its completion record could not be written" in caplog.text
    # The next writer finishes the bookkeeping.
    cluster.failing_appends.clear()
    coordinator(cluster).prepare(EpochId.batch("job-1"))
    assert cluster.last(PREFIX).kind == "complete"  # type: ignore[union-attr]


def test_a_failed_completion_record_is_retried() -> None:
    cluster = Cluster(failing_appends={"complete": KafkaEosDecisionLogError("broker restarting")}, append_failures_left=2)
    tasks = [task(cluster, EpochId.stream(Q1, 0), p) for p in (0, 1)]
    coordinator(cluster).commit(EpochId.stream(Q1, 0), tasks)
    assert committed(cluster, *tasks)
    assert cluster.last(PREFIX).kind == "complete"  # type: ignore[union-attr]


def test_a_decision_that_would_commit_too_close_to_the_deadline_aborts_the_epoch() -> None:
    cluster = Cluster()
    early = task(cluster, EpochId.stream(Q1, 0), 0, started_ms=cluster.clock_ms - 55_000)  # 5 s left on the broker's clock
    fresh = task(cluster, EpochId.stream(Q1, 0), 1)
    with pytest.raises(KafkaEosEpochAbortedError, match="aborted instead of committed.*5.0s after the decision would commit"):
        coordinator(cluster).commit(EpochId.stream(Q1, 0), [early, fresh])
    assert aborted(cluster, early, fresh)
    assert cluster.last(PREFIX) is None


def test_an_unknown_decision_outcome_is_read_back_after_fencing() -> None:
    cluster = Cluster(failing_appends={"decision": KafkaEosDecisionLogError("commit timed out")}, land_failed_appends=True)
    tasks = [task(cluster, EpochId.stream(Q1, 0), p) for p in (0, 1)]
    coordinator(cluster).commit(EpochId.stream(Q1, 0), tasks)
    assert committed(cluster, *tasks)
    after_failure = cluster.events[cluster.events.index("append:decision"):]
    assert after_failure.index("fence-coordinator") < after_failure.index("read")


def test_a_decision_that_landed_and_was_finished_by_another_driver_is_reported_committed() -> None:
    """The decision write reports an error, but it landed; before this driver reads the log back, another
    driver rolls it forward and appends its completion. "Aborted, nothing visible" would be false, and a
    re-run of the job on that message would write it twice."""
    cluster = Cluster(failing_appends={"decision": KafkaEosDecisionLogError("commit timed out")}, land_failed_appends=True,
                      append_failures_left=1)
    cluster.after_landed_failure = lambda: coordinator(cluster).recover()
    tasks = [task(cluster, EpochId.batch("w1"), p) for p in (0, 1)]
    with pytest.raises(KafkaEosEpochCommittedError, match="IS COMMITTED .*Do not re-run it"):
        coordinator(cluster).commit(EpochId.batch("w1"), tasks)
    assert committed(cluster, *tasks)
    assert [r.kind for r in cluster.records] == ["decision", "complete"]


def test_a_decision_that_did_not_land_aborts_the_epoch() -> None:
    cluster = Cluster(failing_appends={"decision": KafkaEosDecisionLogError("not committed")})
    tasks = [task(cluster, EpochId.stream(Q1, 0), p) for p in (0, 1)]
    with pytest.raises(KafkaEosEpochAbortedError, match="could not be written, so the epoch was aborted"):
        coordinator(cluster).commit(EpochId.stream(Q1, 0), tasks)
    assert aborted(cluster, *tasks)


def test_a_superseded_driver_never_aborts_the_participants_of_the_new_owner() -> None:
    cluster = Cluster()
    coordinator(cluster).commit(EpochId.stream(Q1, 0), [])  # the query's first micro-batch, empty
    coordinator(cluster).commit(EpochId.stream(Q1, 3), [task(cluster, EpochId.stream(Q1, 3), 0)])
    owners: list[TaskCommit] = []

    def another_driver_takes_over() -> None:
        # While the old driver lists what is open, a new driver of the same query fences it and decides.
        new_driver = coordinator(cluster)
        owners.append(task(cluster, EpochId.stream(Q1, 4), 0))
        new_driver.commit(EpochId.stream(Q1, 4), owners)
        owners.append(task(cluster, EpochId.stream(Q1, 5), 0))  # its next epoch's task is prepared, undecided

    cluster.on_list = another_driver_takes_over
    straggler = task(cluster, EpochId.stream(Q1, 3), 0, attempt=1)  # something for the old driver to sweep
    with pytest.raises(Exception, match="fenced"):
        coordinator(cluster).commit(EpochId.stream(Q1, 4), [])
    assert committed(cluster, owners[0])
    # Listed by the old driver, but its proof of ownership failed: the new owner's open task is untouched.
    assert cluster.state(owners[1].transaction.transactional_id) == TxnState.ONGOING  # type: ignore[union-attr]
    assert aborted(cluster, straggler)  # by the new owner's sweep


def test_a_straggler_that_opens_after_the_sweep_is_aborted_by_the_next_epoch() -> None:
    cluster = Cluster()
    coordinator(cluster).commit(EpochId.stream(Q1, 0), [task(cluster, EpochId.stream(Q1, 0), 0)])
    straggler = task(cluster, EpochId.stream(Q1, 0), 0, attempt=1)  # a speculative attempt of batch 0, still running
    next_epoch = [task(cluster, EpochId.stream(Q1, 1), 0), task(cluster, EpochId.stream(Q1, 1), 0, attempt=1)]
    assert straggler.transaction is not None and next_epoch[1].transaction is not None
    assert straggler.transaction.transactional_id != next_epoch[1].transaction.transactional_id  # never fenced by it
    coordinator(cluster).commit(EpochId.stream(Q1, 1), next_epoch)
    assert committed(cluster, *next_epoch) and aborted(cluster, straggler)


def test_a_decided_participant_whose_id_was_reused_is_not_reported_lost_when_its_records_are_visible() -> None:
    cluster = Cluster()
    participant = task(cluster, EpochId.stream(Q1, 0), 0)
    assert participant.transaction is not None
    cluster.records.append(LogRecord("decision", PREFIX, str(EpochId.stream(Q1, 0)), (
        Participant(participant.transaction.transactional_id, participant.transaction.producer_id,
                    participant.transaction.producer_epoch, 0, participant.records, participant.probe),)))
    FakeSession(cluster).commit(participant.transaction)  # phase 2 ran, then the driver died before "complete"
    cluster.open_transaction(participant.transaction.transactional_id)  # the id was reused since: a new producer epoch
    cluster.visible.add(participant.transaction.transactional_id)
    coordinator(cluster).prepare()
    assert cluster.last(PREFIX).kind == "complete"  # type: ignore[union-attr]

    cluster.records.append(cluster.records[-2])  # the same decision again, but now its records are not visible
    cluster.visible.clear()
    with pytest.raises(KafkaEosCommittedDataLostError, match="LOST"):
        coordinator(cluster).prepare()


def test_abort_of_a_decided_epoch_rolls_it_forward() -> None:
    cluster = Cluster(failing_appends={"complete": KafkaEosDecisionLogError("log unavailable")})
    tasks = [task(cluster, EpochId.stream(Q1, 0), p) for p in (0, 1)]
    cluster.transient_commit_failures = 1_000  # phase 2 cannot finish now
    with pytest.raises(KafkaEosEpochCommittedError, match="IS COMMITTED"):
        TwoPhaseCommitCoordinator(options(PREFIX), TIMEOUT_MS, **fake_seams(cluster)).commit(
            EpochId.stream(Q1, 0), tasks)
    cluster.transient_commit_failures = 0
    cluster.failing_appends.clear()
    coordinator(cluster).abort(EpochId.stream(Q1, 0), tasks)  # Spark calls abort after commit raised
    assert committed(cluster, *tasks)


def test_abort_of_a_decided_batch_job_rolls_it_forward_and_says_it_is_committed() -> None:
    """A job without writeId whose commit failed after the decision: a retry would be a new job."""
    cluster = Cluster()
    job = EpochId.batch("job-1")
    coordinator(cluster).prepare(job)
    tasks = [task(cluster, job, p) for p in (0, 1)]
    cluster.transient_commit_failures = 1_000  # phase 2 cannot finish now
    with pytest.raises(KafkaEosEpochCommittedError, match="IS COMMITTED"):
        TwoPhaseCommitCoordinator(options(PREFIX), TIMEOUT_MS, **fake_seams(cluster)).commit(job, tasks)
    cluster.transient_commit_failures = 0
    with pytest.raises(KafkaEosEpochCommittedError, match="IS COMMITTED.*Do not re-run"):
        coordinator(cluster).abort(job, tasks)  # Spark calls abort after commit raised
    assert committed(cluster, *tasks)


def test_an_abort_by_a_run_that_does_not_own_the_prefix_touches_only_its_own_transactions() -> None:
    cluster = Cluster()
    coordinator(cluster).commit(EpochId.stream(Q1, 0), [task(cluster, EpochId.stream(Q1, 0), 0)])
    owners_next = task(cluster, EpochId.stream(Q1, 1), 0)
    newcomer = task(cluster, EpochId.stream(Q2, 0), 0)
    coordinator(cluster).abort(EpochId.stream(Q2, 0), [newcomer])
    assert aborted(cluster, newcomer)
    assert cluster.state(owners_next.transaction.transactional_id) == TxnState.ONGOING  # type: ignore[union-attr]


def hourly_jobs_past_the_history(monkeypatch: pytest.MonkeyPatch, hours: int) -> Cluster:
    """``hours`` batch jobs committed under a history of 3 runs archived 2 at a time."""
    monkeypatch.setattr(log_record, "HISTORY_LIMIT", 3)
    monkeypatch.setattr(log_record, "ARCHIVE_BATCH", 2)
    cluster = Cluster()
    for hour in range(hours):
        job = EpochId.batch(f"hour-{hour}")
        coordinator(cluster).commit(job, [task(cluster, job, 0)])
    return cluster


def test_a_write_id_older_than_the_history_a_record_carries_is_still_a_replay_refused_as_its_input_is_not_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Hourly jobs forgot an hour after about six weeks: runs past the record's history go to archives, and are still
    recognised. Their inputs are not kept (the record keeps the last HISTORY_LIMIT jobs' only), so a re-run cannot
    prove it is the same input: refused, nothing of it visible (found by the operator model,
    CHECK_RERUN_INPUT_OF_OLD_WRITE_IDS: told success, corrected data was never written)."""
    cluster = hourly_jobs_past_the_history(monkeypatch, 12)
    last = cluster.last(PREFIX)
    assert last is not None and len(last.runs()) <= 4 and len(last.archives) == 4
    again = EpochId.batch("hour-0")
    rerun = task(cluster, again, 0)
    assert coordinator(cluster).prepare(again).verdict == Verdict.REPLAY
    with pytest.raises(KafkaEosRunRefusedError, match="cannot be proven the same.*it\\s+IS committed"):
        coordinator(cluster).commit(again, [rerun])
    assert aborted(cluster, rerun)


def test_an_archived_write_id_whose_output_was_partly_lost_is_refused_not_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = hourly_jobs_past_the_history(monkeypatch, 8)
    last = cluster.last(PREFIX)
    assert last is not None and last.last_decided(EpochId.batch("hour-0")) is None
    cluster.records.append(LogRecord("reset", PREFIX, "reset:1", history=last.history, archives=last.archives, partly_lost=("batch:hour-0",)))
    with pytest.raises(KafkaEosRunRefusedError, match="refused batch write hour-0: .*part of its output"):
        coordinator(cluster).prepare(EpochId.batch("hour-0"))
    assert coordinator(cluster).prepare(EpochId.batch("hour-1")).verdict == Verdict.REPLAY


def test_abort_of_a_batch_job_decided_before_a_later_job_says_it_is_committed() -> None:
    cluster = Cluster()
    first, second = EpochId.batch("job-1"), EpochId.batch("job-2")
    tasks = [task(cluster, first, 0)]
    coordinator(cluster).commit(first, tasks)
    coordinator(cluster).commit(second, [task(cluster, second, 1)])
    with pytest.raises(KafkaEosEpochCommittedError, match="IS COMMITTED"):
        coordinator(cluster).abort(first, tasks)


@pytest.mark.parametrize("before", ["batch jobs", "a fresh-start reset"])
def test_a_query_past_micro_batch_0_with_no_record_on_a_prefix_that_has_records_is_refused(before: str) -> None:
    # Its checkpoint was made under another prefix, or the prefix lost its records of it: Spark's replay of a
    # micro-batch it decided before would be written twice.
    cluster = Cluster()
    if before == "batch jobs":
        coordinator(cluster).commit(EpochId.batch("backfill"), [task(cluster, EpochId.batch("backfill"), 0)])
    else:
        cluster.records.append(LogRecord("reset", PREFIX, "reset:1"))
    moved = [task(cluster, EpochId.stream(Q1, 3), p) for p in (0, 1)]
    with pytest.raises(KafkaEosRunRefusedError, match=f"no record of streaming query {Q1}, which is at micro-batch 3.*allowNewPrefix"):
        coordinator(cluster).commit(EpochId.stream(Q1, 3), moved)
    assert aborted(cluster, *moved)
    allowed = [task(cluster, EpochId.stream(Q1, 3), p, attempt=1) for p in (0, 1)]
    TwoPhaseCommitCoordinator(options(PREFIX, allowNewPrefix="true"), TIMEOUT_MS, **fake_seams(cluster)).commit(
        EpochId.stream(Q1, 3), allowed)
    following = [task(cluster, EpochId.stream(Q1, 4), 0)]
    coordinator(cluster).commit(EpochId.stream(Q1, 4), following)  # known from then on
    assert committed(cluster, *allowed, *following)


def test_a_query_known_only_from_the_prefix_archives_goes_on() -> None:
    cluster = Cluster()
    coordinator(cluster).commit(EpochId.stream(Q1, 0), [task(cluster, EpochId.stream(Q1, 0), 0)])
    last = cluster.last(PREFIX)
    assert last is not None
    cluster.archives.append(last.runs())
    cluster.records.append(LogRecord("reset", PREFIX, "reset:1", archives=((len(cluster.archives) - 1, ""),)))
    goes_on = [task(cluster, EpochId.stream(Q1, 1), 0)]
    coordinator(cluster).commit(EpochId.stream(Q1, 1), goes_on)
    assert committed(cluster, *goes_on)
