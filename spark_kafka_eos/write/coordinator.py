"""The driver as two-phase-commit coordinator of one Spark epoch (a micro-batch, or a batch job).

Tasks prepared their transactions (produced and flushed, left open). ``commit``:

1. reads the prefix's last decision-log record and judges who owns the prefix
   (:mod:`spark_kafka_eos.write.ownership`): a run that does not own it is refused before anything
   is visible, and before it fences the owner;
2. fences any other driver of the prefix (``init_transactions`` of the coordinator id), then reads
   the log again: this read is authoritative;
3. a replay of the epoch already decided is finished and this run's transactions are aborted;
4. an unfinished decision of an earlier epoch is rolled forward;
5. verifies every participant (DescribeTransactions): Ongoing, same producer id and epoch;
6. decides: the decision record (and the consumer group's offsets) commit in the coordinator's own
   transaction, unless the broker's clock says the earliest participant deadline is too near. This is
   the commit point;
7. phase 2: EndTxn(commit) for every participant, retried within their deadline, then a ``complete``
   record, after which the listed lingering transactions of the prefix are aborted.

``abort`` consults the log first: a decided epoch is rolled forward, never aborted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, ContextManager, Optional, Sequence

from pyspark.sql.datasource import WriterCommitMessage

from spark_kafka_eos.cluster import shared_session
from spark_kafka_eos.connection import KafkaConnection
from spark_kafka_eos.errors import KafkaEosCommitError, KafkaEosCommittedDataLostError
from spark_kafka_eos.txn.session import PreparedTxnState, TransactionSession
from spark_kafka_eos.write.commit_message import TaskCommit
from spark_kafka_eos.write.consumer_group import check_not_backwards
from spark_kafka_eos.write.decision_log import DecisionLog, RecordNotCommittedError
from spark_kafka_eos.write.hooks import NO_HOOKS, WriterHooks
from spark_kafka_eos.write.log_record import EpochId, LogRecord, Participant
from spark_kafka_eos.write.ownership import Judgement, Verdict, judge
from spark_kafka_eos.write.recovery import VisibilityCheck, abort_lingering, abort_prepared, is_open, roll_forward
from spark_kafka_eos.write.transactional_id import coordinator_transactional_id
from spark_kafka_eos.write.visibility import committed_record_at
from spark_kafka_eos.write.writer_options import WriterOptions

log = logging.getLogger(__name__)

DEADLINE_MARGIN_MS = 10_000
"""The decision must commit at least this long before the earliest participant's transaction times
out (on the broker's clock): phase 2 has to reach every participant in time."""
RECOVERY_RETRY_BUDGET_S = 60.0
"""How long phase 2 of a decision found in the log is retried, when its participants' deadline is unknown."""
_MAX_RETRY_DELAY_S = 2.0
_COMPLETION_ATTEMPTS = 3


class _DeadlineTooNear(Exception):
    """Raised before the decision transaction commits: it would commit too late."""


class TwoPhaseCommitCoordinator:
    """Commits or aborts epochs of a prefix. Stateless between epochs: its state is in Kafka.

    The decision log, the session and the visibility check are seams, so that interleavings can be
    tested with fakes; ``hooks`` lets tests stop it at named points."""

    def __init__(
        self,
        options: WriterOptions,
        transaction_timeout_ms: int,
        hooks: WriterHooks = NO_HOOKS,
        open_log: Callable[[WriterOptions], DecisionLog] = DecisionLog,
        open_session: Callable[[KafkaConnection], ContextManager[TransactionSession]] = shared_session,
        visible: Optional[VisibilityCheck] = None,
    ) -> None:
        self._options = options
        self._timeout_ms = transaction_timeout_ms
        self._hooks = hooks
        self._open_log = open_log
        self._open_session = open_session
        self._visible: VisibilityCheck = visible or (lambda p: p.probe is not None and committed_record_at(options, p.probe))
        self._prefix = options.prefix

    # -- before the tasks -------------------------------------------------------------------
    def prepare(self, epoch: Optional[EpochId] = None) -> Judgement:
        """Runs on the driver before any task of an epoch: fence other drivers of the prefix, then roll
        its last decision forward, so that no task re-initialises a decided participant's id. With
        ``epoch`` (a batch job, whose run is known up front): judge it, refusing a run that does not
        own the prefix, and sweep what earlier jobs left open."""
        decision_log = self._log()
        with self._open_session(self._options.connection) as session:
            if epoch is not None:
                self._refuse_unless_owner(judge(decision_log.last(self._prefix), epoch), epoch, session, [])
            decision_log.fence(self._prefix)
            last = decision_log.last(self._prefix)
            if epoch is None:
                self._finish(session, decision_log, last, RECOVERY_RETRY_BUDGET_S)
                return Judgement(Verdict.PROCEED)
            judgement = judge(last, epoch)
            self._refuse_unless_owner(judgement, epoch, session, [])
            last = self._finish(session, decision_log, last, RECOVERY_RETRY_BUDGET_S)
            if judgement.verdict == Verdict.PROCEED:
                self._sweep(session, decision_log, last, keep=())
            return judgement

    # -- commit ---------------------------------------------------------------------------
    def commit(self, epoch: EpochId, messages: Sequence[Optional[WriterCommitMessage]]) -> None:
        tasks = _task_commits(messages, epoch)
        own = [t.transaction for t in tasks if t.transaction is not None]
        decision_log = self._log()
        with self._open_session(self._options.connection) as session:
            # A run that does not own the prefix is refused before it fences the owner.
            self._refuse_unless_owner(judge(decision_log.last(self._prefix), epoch), epoch, session, own)
            decision_log.fence(self._prefix)
            last = decision_log.last(self._prefix)
            judgement = judge(last, epoch)
            self._refuse_unless_owner(judgement, epoch, session, own)
            if judgement.verdict == Verdict.REPLAY:
                assert last is not None
                self._finish_replay(session, decision_log, last, own)
                return
            last = self._finish(session, decision_log, last, RECOVERY_RETRY_BUDGET_S)
            participants = tuple(
                Participant(t.transaction.transactional_id, t.transaction.producer_id, t.transaction.epoch,
                            t.spark_partition, t.records, t.probe)
                for t in tasks if t.transaction is not None
            )
            if not participants:
                self._sweep(session, decision_log, last, keep=())
                return
            deadline_ms = self._verify(session, participants)
            decision = LogRecord("decision", self._prefix, str(epoch), participants, self._options.consumer_group,
                                 _source_offsets(tasks))
            group_offsets = _group_offsets(decision)
            if group_offsets:
                self._abort_on_error(session, own, lambda: check_not_backwards(self._options, group_offsets))
            self._hooks.at("before_decision", session, decision)
            self._decide(session, decision_log, decision, group_offsets, deadline_ms)
            self._hooks.at("after_decision", session, decision)
            self._hooks.at("during_phase2", session, decision)
            self._finish_decided(session, decision_log, decision, deadline_ms)
        log.info("Committed %s of prefix %s: %d participants", epoch, self._prefix, len(participants))

    def _refuse_unless_owner(self, judgement: Judgement, epoch: EpochId, session: TransactionSession,
                             own: Sequence[PreparedTxnState]) -> None:
        if judgement.verdict != Verdict.REFUSE:
            return
        abort_prepared(session, own)
        raise KafkaEosCommitError(
            f"transactional.id.prefix '{self._prefix}' refused {epoch.describe()}: {judgement.reason}. Nothing of it "
            "was committed. Fix: give this query (or job) its own transactional.id.prefix; or, if the run that owns "
            "the prefix is gone for good (its checkpoint deleted), hand the prefix over with "
            f"`kafka-eos reset --bootstrap-servers ... --prefix {self._prefix}` (python -m spark_kafka_eos.cli reset ...)."
        )

    def _finish_replay(self, session: TransactionSession, decision_log: DecisionLog, last: LogRecord,
                       own: Sequence[PreparedTxnState]) -> None:
        """Spark re-ran an epoch that is already decided: its output is (being) committed, so this
        run's other transactions are duplicates and are aborted (first, so that they cannot linger
        if finishing the decision fails)."""
        decided = {p.txn for p in last.participants}
        duplicates = [t for t in own if t not in decided]
        abort_prepared(session, duplicates)
        last = self._finish(session, decision_log, last, RECOVERY_RETRY_BUDGET_S)
        self._sweep(session, decision_log, last, keep=())
        log.warning("Epoch %s of prefix %s was already decided: aborted %d duplicate transactions",
                    last.epoch_id, self._prefix, len(duplicates))

    def _verify(self, session: TransactionSession, participants: Sequence[Participant]) -> int:
        """Check every participant is still open; return the earliest deadline (broker clock, ms)."""
        states = session.describe([p.transactional_id for p in participants])
        problems = [
            f"{p.transactional_id} is {d.state} (producer {d.producer_id} epoch {d.producer_epoch}), not the open "
            f"transaction of producer {p.producer_id} epoch {p.epoch}: it timed out or was fenced"
            for p in participants for d in [states[p.transactional_id]] if not is_open(p, d)
        ]
        if problems:
            self._abort_epoch(session, participants, "; ".join(problems))
        return min(d.transaction_start_time_ms + d.transaction_timeout_ms for d in states.values())

    def _decide(self, session: TransactionSession, decision_log: DecisionLog, decision: LogRecord,
                group_offsets: Optional[dict[tuple[str, int], int]], deadline_ms: int) -> None:
        coordinator_id = coordinator_transactional_id(self._prefix)

        def in_time() -> None:
            # The decision transaction's start time is the broker's clock now; the driver's may be off.
            broker_now_ms = session.describe([coordinator_id])[coordinator_id].transaction_start_time_ms
            if broker_now_ms > deadline_ms - DEADLINE_MARGIN_MS:
                raise _DeadlineTooNear(f"the earliest participant times out {max(deadline_ms - broker_now_ms, 0) / 1000:.1f}s "
                                       f"after the decision would commit, less than the {DEADLINE_MARGIN_MS / 1000:g}s margin")

        try:
            decision_log.append(decision, group_offsets, before_commit=in_time)
        except _DeadlineTooNear as late:
            self._abort_epoch(session, decision.participants, str(late))
        except RecordNotCommittedError as refused:
            _abort_undecided(session, decision, refused)
        except Exception as err:
            self._settle_unknown_outcome(session, decision, err)

    def _settle_unknown_outcome(self, session: TransactionSession, decision: LogRecord, err: Exception) -> None:
        """The decision write failed: its outcome is whatever the log says. Fence first (a commit still in
        flight can then no longer land), then read it back."""
        try:
            fenced = self._log()
            fenced.fence(self._prefix)
            recorded = fenced.last(self._prefix)
        except Exception as unreadable:
            # Unknown outcome: abort nothing; abort() or the next recovery reads the log again.
            raise KafkaEosCommitError(
                f"The decision write failed ({err}) and the log could not be read back ({unreadable}); "
                "the epoch's fate is settled by the next recovery."
            ) from err
        if recorded is not None and recorded.kind == "decision" and recorded.epoch_id == decision.epoch_id \
                and recorded.participants == decision.participants:
            log.warning("Decision write reported %s, but the decision is in the log: going on", err)
            return
        _abort_undecided(session, decision, err)

    def _abort_epoch(self, session: TransactionSession, participants: Sequence[Participant], why: str) -> None:
        abort_prepared(session, [p.txn for p in participants])
        raise KafkaEosCommitError(
            f"The epoch was aborted instead of committed, because not every task's transaction can still be committed: "
            f"{why}. Nothing of it is visible. Fix: the epoch ran longer than the transaction timeout allows; make epochs "
            "shorter (smaller micro-batches: maxOffsetsPerTrigger; or split a batch write), or raise "
            "kafka.transaction.timeout.ms up to the broker's transaction.max.timeout.ms."
        )

    def _abort_on_error(self, session: TransactionSession, own: Sequence[PreparedTxnState], check: Callable[[], None]) -> None:
        try:
            check()
        except Exception:
            abort_prepared(session, own)
            raise

    def _finish_decided(self, session: TransactionSession, decision_log: DecisionLog, decision: LogRecord, deadline_ms: int) -> None:
        """Phase 2 of the decision just taken, retried until the participants' deadline. Past the commit
        point, a failure must not read as "nothing was written": a re-run of a batch job would write
        everything twice."""
        # The driver's clock is good enough for a retry budget; deciding used the broker's.
        budget_s = max((deadline_ms - time.time() * 1000) / 1000, 1.0)
        try:
            last = self._finish(session, decision_log, decision, budget_s)
        except KafkaEosCommittedDataLostError:
            raise
        except Exception as err:
            raise KafkaEosCommitError(
                f"Epoch {decision.epoch_id} of prefix '{self._prefix}' IS COMMITTED (its decision is in the log), but "
                f"phase 2 did not finish: {err}. Do not re-run it: the next start of a writer with this prefix (or "
                f"`kafka-eos recover --prefix {self._prefix} ...`) makes all of it visible."
            ) from err
        try:
            self._sweep(session, decision_log, last, keep=[p.transactional_id for p in decision.participants])
        except Exception as err:  # noqa: BLE001 - clean-up only; the next epoch retries it
            log.warning("Could not abort lingering transactions of %s after %s: %s", self._prefix, decision.epoch_id, err)

    def _finish(self, session: TransactionSession, decision_log: DecisionLog, record: Optional[LogRecord],
                budget_s: float) -> Optional[LogRecord]:
        """Phase 2 of ``record`` if it is a decision: commit every participant, retrying failures for
        ``budget_s``, then append its completion. Returns the prefix's last record. Once every participant
        is committed, a completion record that cannot be written only warns: the data is all there, and
        the next epoch (or recovery) writes it."""
        if record is None or record.kind != "decision":
            return record
        deadline = time.monotonic() + budget_s
        delay = 0.1
        while True:
            try:
                roll_forward(session, record, self._visible)
                break
            except KafkaEosCommittedDataLostError:
                raise
            except Exception as err:
                if time.monotonic() + delay > deadline:
                    raise
                log.info("Phase 2 of %s failed (%s); retrying", record.epoch_id, err)
                time.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_DELAY_S)
        completed = record.completed()
        for attempt in range(_COMPLETION_ATTEMPTS):
            try:
                decision_log.append(completed)
                return completed
            except Exception as err:  # noqa: BLE001 - the data is committed; only the bookkeeping is late
                if attempt + 1 == _COMPLETION_ATTEMPTS or time.monotonic() + delay > deadline:
                    log.warning("Epoch %s of prefix %s is committed, but its completion record could not be written "
                                "(%s); the next epoch or recovery writes it", record.epoch_id, self._prefix, err)
                    return record
                time.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_DELAY_S)
        return record

    def _sweep(self, session: TransactionSession, decision_log: DecisionLog, last: Optional[LogRecord], keep: Sequence[str]) -> None:
        """Abort what is left open of the prefix. Ownership is proven after listing by re-appending the last
        record in the coordinator's transaction, which fails if another driver has fenced this one."""
        abort_lingering(session, self._prefix, self._timeout_ms, lambda: _prove(decision_log, last), keep)

    # -- the operator's recovery ------------------------------------------------------------
    def recover(self, accept_data_loss: bool = False) -> "RecoveryReport":
        """What the CLI's ``recover`` does: fence other drivers, roll the prefix's last decision forward,
        then abort everything of the prefix left open. Run it only when no query uses the prefix.
        Lost participants raise, unless ``accept_data_loss``: then they are reported."""
        decision_log = self._log()
        with self._open_session(self._options.connection) as session:
            decision_log.fence(self._prefix)
            before = decision_log.last(self._prefix)
            lost: Optional[str] = None
            try:
                last = self._finish(session, decision_log, before, RECOVERY_RETRY_BUDGET_S)
            except KafkaEosCommittedDataLostError as err:
                if not accept_data_loss:
                    raise
                lost, last = str(err), before
            aborted = abort_lingering(session, self._prefix, self._timeout_ms, lambda: _prove(decision_log, last))
        return RecoveryReport(before, lost, aborted)

    # -- abort ----------------------------------------------------------------------------
    def abort(self, epoch: EpochId, messages: Sequence[Optional[WriterCommitMessage]]) -> None:
        """Spark gave up on ``epoch`` (a task failed, or commit raised)."""
        own = [m.transaction for m in messages if isinstance(m, TaskCommit) and m.transaction is not None]
        decision_log = self._log()
        with self._open_session(self._options.connection) as session:
            if judge(decision_log.last(self._prefix), epoch).verdict == Verdict.REFUSE:
                abort_prepared(session, own)  # not the owner: touch nothing else
                return
            decision_log.fence(self._prefix)
            last = decision_log.last(self._prefix)
            judgement = judge(last, epoch)
            if judgement.verdict == Verdict.REPLAY:
                assert last is not None
                self._finish_replay(session, decision_log, last, own)  # decided before the failure: it stands
                return
            abort_prepared(session, own)
            if judgement.verdict == Verdict.PROCEED:
                last = self._finish(session, decision_log, last, RECOVERY_RETRY_BUDGET_S)
                self._sweep(session, decision_log, last, keep=())

    def _log(self) -> DecisionLog:
        decision_log = self._open_log(self._options)
        decision_log.ensure_topic()
        return decision_log


@dataclass(frozen=True)
class RecoveryReport:
    """What :meth:`TwoPhaseCommitCoordinator.recover` found and did."""

    last_before: Optional[LogRecord]
    data_loss: Optional[str]
    aborted: list[str]


def _abort_undecided(session: TransactionSession, decision: LogRecord, err: Exception) -> None:
    """The decision is certainly not in the log: abort its participants, so that nothing pins the LSO."""
    abort_prepared(session, [p.txn for p in decision.participants])
    raise KafkaEosCommitError(f"The decision could not be written, so the epoch was aborted (nothing of it is visible): {err}") from err


def _prove(decision_log: DecisionLog, last: Optional[LogRecord]) -> None:
    """Re-append the last record in the coordinator's transaction: it fails if another driver fenced this one."""
    if last is not None:
        decision_log.append(last)


def _task_commits(messages: Sequence[Optional[WriterCommitMessage]], epoch: EpochId) -> list[TaskCommit]:
    tasks = [m for m in messages if isinstance(m, TaskCommit)]
    strangers = sorted({t.epoch_id for t in tasks} - {str(epoch)})
    if strangers:
        raise KafkaEosCommitError(f"Tasks of epoch(s) {strangers} were handed to the commit of {epoch}: a bug; nothing was committed.")
    return tasks


def _source_offsets(tasks: Sequence[TaskCommit]) -> tuple[tuple[str, int, int], ...]:
    """The next offset to consume per source partition: the highest over all tasks."""
    best: dict[tuple[str, int], int] = {}
    for task in tasks:
        for topic, partition, offset in task.source_offsets:
            best[(topic, partition)] = max(offset, best.get((topic, partition), offset))
    return tuple((t, p, o) for (t, p), o in sorted(best.items()))


def _group_offsets(decision: LogRecord) -> Optional[dict[tuple[str, int], int]]:
    if not decision.consumer_group or not decision.offsets:
        return None
    return {(t, p): o for t, p, o in decision.offsets}
