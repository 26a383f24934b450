"""The driver as two-phase-commit coordinator of one Spark epoch (a micro-batch, or a batch job).

Tasks prepared their transactions (produced and flushed, left open). ``commit``:

1. reads the prefix's last decision-log record and judges who owns the prefix
   (:mod:`spark_kafka_eos._internal.write.ownership`): a run that does not own it is refused before anything
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
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import TypeVar

from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql.datasource import WriterCommitMessage

from spark_kafka_eos._internal.cluster import cached_session, cluster_metadata
from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.config.writer import DEADLINE_MARGIN_MS, WriterOptions
from spark_kafka_eos._internal.decision_log.coordinator_id import COORDINATOR_TRANSACTION_TIMEOUT_MS, coordinator_transactional_id
from spark_kafka_eos._internal.decision_log.group_marker import GroupMarker
from spark_kafka_eos._internal.decision_log.kafka_log import (
    KafkaDecisionLog,
    RecordNotCommittedError,
    transactional_id_refused,
)
from spark_kafka_eos._internal.decision_log.protocol import DecisionLog
from spark_kafka_eos._internal.decision_log.records import (
    BatchInput,
    EpochId,
    EpochInput,
    LogRecord,
    Participant,
    Position,
    announced_among,
    history_with,
    memory_after,
)
from spark_kafka_eos._internal.retry import OPERATION_TIMEOUT_S, Backoff, Deadline, any_error, retry, wait_until
from spark_kafka_eos._internal.txn.protocol import TransactionClient
from spark_kafka_eos._internal.txn.session import PreparedTxnState, TxnDescription, TxnSessionError, TxnState
from spark_kafka_eos._internal.write.commit_message import TaskCommit
from spark_kafka_eos._internal.write.commit_outcomes import Ending
from spark_kafka_eos._internal.write.commit_watch import watched
from spark_kafka_eos._internal.write.consumer_group import check_group_position
from spark_kafka_eos._internal.write.epoch_input import describe, describe_offsets, input_difference, kafka_positions, stream_input
from spark_kafka_eos._internal.write.group_claim import CLAIM_ATTEMPTS, GroupClaim, GroupClaimLost
from spark_kafka_eos._internal.write.hooks import AFTER_DECISION, BEFORE_DECISION, DURING_PHASE2, NO_HOOKS, WriterHooks
from spark_kafka_eos._internal.write.ownership import Judgement, Verdict, judge
from spark_kafka_eos._internal.write.recovery import (
    ProbesNotStableError,
    VisibilityCheck,
    abort_lingering,
    abort_prepared,
    is_committed,
    is_open,
    open_transactions,
    roll_forward,
)
from spark_kafka_eos._internal.write.row_digest import add, as_text
from spark_kafka_eos._internal.write.spark_checkpoint import names_query
from spark_kafka_eos._internal.write.transactional_id import parse_task_transactional_id
from spark_kafka_eos._internal.write.visibility import committed_record_at
from spark_kafka_eos.errors import (
    KafkaEosCommittedDataLostError,
    KafkaEosDecisionLogError,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

_PHASE2_BACKOFF = Backoff(0.1, 2.0)
"""The waits between tries of phase 2 and of the completion record after it. A decision found in the log, whose
participants' deadline is unknown, is retried for :data:`~spark_kafka_eos._internal.retry.OPERATION_TIMEOUT_S`."""
_COMPLETION_ATTEMPTS = 3
_SWEEP_ATTEMPTS = 3
_SWEEP_LISTING = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-eos-sweep-listing")
DECISION_IN_FLIGHT_WAIT_S = 5.0
STRAGGLER_GRACE_S = 10.0
"""How long abort() keeps sweeping for tasks of the failed epoch that prepared after it began."""


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
        open_log: Callable[[WriterOptions], DecisionLog] = KafkaDecisionLog,
        session_of: Callable[[KafkaConnection], TransactionClient] = cached_session,
        visible: VisibilityCheck | None = None,
    ) -> None:
        self._options = options
        self._timeout_ms = transaction_timeout_ms
        self._hooks = hooks
        self._open_log = open_log
        self._session_of = session_of
        self._visible: VisibilityCheck = visible or (
            lambda p: p.probe is not None and committed_record_at(options, p.probe, p.probe_digest))
        self._prefix = options.prefix

    # -- before the tasks -------------------------------------------------------------------
    def prepare(self, epoch: EpochId | None = None) -> Judgement:
        """Runs on the driver before any task of an epoch: fence other drivers of the prefix, then roll
        its last decision forward, so that no task re-initialises a decided participant's id. With
        ``epoch`` (a batch job, whose run is known up front): judge it, refusing a run that does not
        own the prefix, and sweep what earlier jobs left open."""
        decision_log = self._log()
        if epoch is None and self._nothing_to_roll_forward(decision_log):
            return Judgement(Verdict.PROCEED)
        with self._marked(decision_log), nullcontext(self._session_of(self._options.connection)) as session:
            judgement = self._prepare(session, decision_log, epoch)
        decision_log.keep_for_reuse()
        return judgement

    def _nothing_to_roll_forward(self, decision_log: DecisionLog) -> bool:
        """A stream's planning needs no fence when the prefix's last record is no decision: Spark plans every
        micro-batch (and opens every commit) on a fresh writer, and a fence there would cost each of them a new
        coordinator producer and its history mark, in whichever of the two processes did not fence last. The
        fence is not what keeps tasks off another driver's decided participants: a decided participant's
        transaction is open until its phase 2, and a task never initialises an id with an open transaction
        (:func:`~spark_kafka_eos._internal.write.task_producer.write_task`). The commit fences, judges and rolls forward
        on its own. A lost log is still refused here (:meth:`_last_before_fencing`).

        Nor does a decision whose participants all show their own transaction committed: its phase 2 is done, and
        its completion is bookkeeping that the next commit writes."""
        with nullcontext(self._session_of(self._options.connection)) as session:
            last = self._last_before_fencing(decision_log, session)
            if last is None:
                return False
            if last.kind != "decision":
                return True
            states = session.describe([p.transactional_id for p in last.participants])
        return all(is_committed(p, states[p.transactional_id]) for p in last.participants)

    def _prepare(self, session: TransactionClient, decision_log: DecisionLog, epoch: EpochId | None) -> Judgement:
        before = self._last_before_fencing(decision_log, session)
        if epoch is not None:
            self._refuse_unless_owner(judge(before, epoch), epoch, session, [])
        else:
            # A stream's run is not known before its tasks: it cannot be judged yet, so its fence must
            # not abort a decision another driver (the owner, if this query is not) has in flight.
            self._wait_for_decision_in_flight(session)
        last = decision_log.fenced_last(self._prefix)
        if epoch is None:
            self._finish(session, decision_log, last, OPERATION_TIMEOUT_S)
            return Judgement(Verdict.PROCEED)
        judgement = _judge(decision_log, last, epoch)
        self._refuse_unless_owner(judgement, epoch, session, [])
        last = self._finish(session, decision_log, last, OPERATION_TIMEOUT_S)
        if judgement.verdict == Verdict.PROCEED:
            self._sweep(session, decision_log, last, keep=())
        return judgement

    # -- commit ---------------------------------------------------------------------------
    def commit(self, epoch: EpochId, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Decide ``epoch``, make its participants visible (phase 2), abort what its other task attempts left
        open, and write the decision's completion: everything it starts ends before it returns, since the Python
        worker that runs it may end at any time after (``os._exit``, SIGKILL: no ``atexit``, no thread lives on)."""
        tasks = _task_commits(messages, epoch)
        decision_log = self._log()
        session = self._session_of(self._options.connection)
        with watched(f"The commit of {epoch} of prefix {self._prefix}"), self._marked(decision_log):
            self._commit(session, decision_log, epoch, tasks, self._input_of(epoch, tasks))
        decision_log.keep_for_reuse()

    def confirm_rerun(self, epoch: EpochId, messages: Sequence[WriterCommitMessage | None]) -> None:
        """A batch job whose ``writeId`` is already committed wrote nothing: its input must be the one decided, or
        it is told loudly (a backfill re-run over corrected data would otherwise succeed without writing it)."""
        last = self._log().last(self._prefix)
        tasks = _task_commits(messages, epoch)
        why = None if last is None else self._replay_difference(last, epoch, tasks, self._input_of(epoch, tasks))
        if why is not None:
            raise Ending.RUN_REFUSED.error(why)

    def _input_of(self, epoch: EpochId, tasks: Sequence[TaskCommit]) -> EpochInput:
        rows = sum(t.input_rows for t in tasks)
        digests = [t.rows_digest for t in tasks]
        digest = None if None in digests else as_text(add(*(int(d, 16) for d in digests if d is not None)))
        if epoch.kind != "stream" or epoch.batch_id is None:
            return EpochInput(rows, source_columns=_source_offsets(tasks) or None, digest=digest)
        checkpoint = self._options.checkpoint_location or _session_checkpoint(tasks, epoch.run_id)
        read = replace(stream_input(checkpoint, epoch.batch_id, rows), digest=digest)
        if read.source_end is not None:
            return read
        _warn_proven_by_digest_alone(self._prefix, checkpoint)
        # Where the offset log cannot be read, the rows' source columns still say where the micro-batch read.
        return replace(read, source_columns=_source_offsets(tasks) or None)

    def _commit(self, session: TransactionClient, decision_log: DecisionLog, epoch: EpochId,
                tasks: Sequence[TaskCommit], epoch_input: EpochInput) -> None:
        own = [t.transaction for t in tasks if t.transaction is not None]
        # A run that does not own the prefix is refused before it fences the owner.
        self._refuse_unless_owner(judge(self._last_before_fencing(decision_log, session, own), epoch), epoch, session, own)
        last = decision_log.fenced_last(self._prefix)
        try:
            judgement = _judge(decision_log, last, epoch)
        except KafkaEosDecisionLogError:
            abort_prepared(session, own)  # not in the record's history, so none of them is decided: left open they pin the LSO
            raise
        self._refuse_unless_owner(judgement, epoch, session, own)
        if judgement.verdict == Verdict.REPLAY:
            assert last is not None
            self._refuse_unless_same_input(last, epoch, tasks, epoch_input, session, own)
            self._finish_replay(session, decision_log, last, own)
            return
        self._refuse_unless_known(last, epoch, session, own, decision_log)
        self._refuse_if_being_swept(last, epoch, session, own, decision_log)
        last = self._finish(session, decision_log, last, OPERATION_TIMEOUT_S)
        participants = tuple(
            Participant(t.transaction.transactional_id, t.transaction.producer_id, t.transaction.producer_epoch,
                        t.spark_partition, t.records, t.probe, t.probe_digest)
            for t in tasks if t.transaction is not None
        )
        history, archives = decision_log.archive(self._prefix, history_with(last, epoch, int(time.time() * 1000)),
                                                 last.archives if last is not None else ())
        if not participants:
            if epoch.kind == "stream" and (last is None or last.last_decided(epoch) is None):
                # The query's first micro-batch wrote nothing: record it anyway, so that the prefix knows the
                # query (its later first decision is then not taken for a query moved here). Not for a batch
                # job: an empty run re-run once its input has arrived must write it.
                last = LogRecord("complete", self._prefix, str(epoch), history=history, input=epoch_input,
                                 **{**memory_after(last), "archives": archives})  # type: ignore[arg-type]
                decision_log.append(last)
            self._sweep(session, decision_log, last, keep=())
            return
        deadline_ms = self._verify(session, participants)
        offsets, starts = self._consumed(epoch, tasks, epoch_input, session, own)
        batch_input: BatchInput | None = None
        if epoch.kind == "batch":
            batch_input = (str(epoch), epoch_input.rows) if epoch_input.digest is None else (str(epoch), epoch_input.rows, epoch_input.digest)
        decision = LogRecord("decision", self._prefix, str(epoch), participants, self._options.consumer_group, offsets,
                             history=history, input=epoch_input,
                             **{**memory_after(last, self._options.consumer_group, offsets, batch_input),  # type: ignore[arg-type]
                                "archives": archives},
                             starts=starts if self._options.consumer_group else ())
        self._decide_on_group(session, decision_log, decision, starts, last, deadline_ms, own)
        self._hooks.at(AFTER_DECISION, session, decision)
        # The sweep's listing needs only the decision before it (a straggler that opens later sees the decision
        # itself), not phase 2: it runs beside phase 2; what it finds is aborted only after.
        listing = _SWEEP_LISTING.submit(open_transactions, session, self._prefix)
        self._hooks.at(DURING_PHASE2, session, decision)
        phase2_deadline = self._finish_decided(session, decision, deadline_ms)
        completed_by_sweep = self._sweep_after_phase2(session, decision_log, decision, listing)
        if not completed_by_sweep:
            self._complete(decision_log, decision, phase2_deadline)
        log.info("Committed %s of prefix %s: %d participants", epoch, self._prefix, len(participants))

    def _consumed(self, epoch: EpochId, tasks: Sequence[TaskCommit], epoch_input: EpochInput, session: TransactionClient,
                  own: Sequence[PreparedTxnState]) -> tuple[tuple[Position, ...], tuple[Position, ...]]:
        """(next offset, first offset) per source partition the epoch consumed: from the rows' source columns, or,
        for a stream with ``consumerGroup`` whose rows carry none, from Spark's offset log (the micro-batch's end)."""
        offsets = _source_offsets(tasks)
        starts = tuple((t, p, o) for (t, p), o in sorted(_merged((task.source_starts for task in tasks), min).items()))
        if offsets or not self._options.consumer_group or epoch.kind != "stream":
            return offsets, starts
        positions = kafka_positions(epoch_input)
        if positions is None:
            abort_prepared(session, own)
            raise Ending.RUN_REFUSED.error(
                f"consumerGroup '{self._options.consumer_group}': {epoch.describe()}'s rows carry no source columns, and "
                f"Spark's offset log under checkpointLocation '{self._options.checkpoint_location}' could not be read or "
                "names a source that is not Kafka, so the offsets it consumed are unknown. Nothing of it was committed; "
                "a re-run as it stands is refused again. Fix: carry the reader's topic, partition and offset columns as "
                "source_topic, source_partition and source_offset, or remove consumerGroup.")
        return positions

    def _check_group(self, starts: Sequence[Position], group_offsets: dict[tuple[str, int], int], last: LogRecord | None,
                     decision_log: DecisionLog) -> None:
        """The group must stand where this epoch started (compare-and-set), and a decision of another
        prefix that moved it must be finished before this one builds on it. Where the group has no offset (Kafka
        expired it, or someone deleted it), the furthest one that this prefix or another prefix of the log last
        committed to it stands in (one scan of the log)."""
        group = self._options.consumer_group
        assert group is not None
        remembered = last.group_position(group) if last is not None else {}
        committed = check_group_position(self._options, {(t, p): o for t, p, o in starts}, group_offsets, remembered,
                                         lambda: _group_positions_elsewhere(decision_log, group, self._prefix))
        settle_group(self._options.connection, group, committed,
                     own=(self._options.decision_log_topic, self._prefix))

    def _refuse_unless_known(self, last: LogRecord | None, epoch: EpochId, session: TransactionClient,
                             own: Sequence[PreparedTxnState], decision_log: DecisionLog) -> None:
        """A query past micro-batch 0 of which the prefix has no record did not start on this prefix: its
        checkpoint was made under another prefix (spelt another way, another transactional.id.prefix, a prefix that
        batch jobs use), or the prefix's records of it were lost and reset since; a replay of a micro-batch it decided
        before would be written again here."""
        if epoch.kind != "stream" or not epoch.batch_id or self._options.allow_new_prefix:
            return
        if last is not None and (last.last_decided(epoch) is not None or _archived_epochs(decision_log, last, epoch)):
            return
        abort_prepared(session, own)
        if last is None:
            held = "has no record at all"
        elif last.kind == "reset" and not last.runs():
            held = "was reset to a fresh start (its decision log had lost its records) and has no record of it since"
        else:
            latest = "a reset" if last.kind == "reset" else f"the {last.kind} of {last.epoch.describe()}"
            held = f"holds records of other runs only (its last record: {latest})"
        raise Ending.RUN_REFUSED.error(
            f"transactional.id.prefix '{self._prefix}' has no record of streaming query {epoch.run_id}, which is at "
            f"micro-batch {epoch.batch_id}: the prefix {held}. The query started under another prefix (a checkpoint path "
            "spelt another way, a changed transactional.id.prefix or decisionLogTopic), or its records here were lost, and "
            "a micro-batch it decided before and Spark replays now would be written twice. Nothing of it was committed. "
            "Fix: set transactional.id.prefix to the prefix the query used before (`kafka-eos inspect` shows a prefix's "
            "last record); or start the query on a new checkpoint; or, if the checkpoint's last micro-batch is in its "
            "commits/ directory (Spark replays none), add .option('allowNewPrefix', 'true') once."
        )

    def _refuse_if_being_swept(self, last: LogRecord | None, epoch: EpochId, session: TransactionClient,
                               own: Sequence[PreparedTxnState], decision_log: DecisionLog) -> None:
        """A sweep that proved it owned the prefix before this driver fenced it may still be aborting the
        transactions it announced then: a participant among them could be aborted after the decision."""
        swept = last.announced_aborts(own) if last is not None else \
            announced_among(decision_log.sweep_announcement(self._prefix), own)
        if not swept:
            return
        abort_prepared(session, own)
        raise Ending.SWEPT.error(
            f"{epoch.describe()} of transactional.id.prefix '{self._prefix}' was not committed: while its tasks' "
            f"transactions were open, a sweep of the prefix (`kafka-eos recover` or `reset`, or another driver of it) "
            f"listed {len(swept)} of them as lingering ({', '.join(t.transactional_id for t in swept)}) and may still "
            "be aborting them. Nothing of it is visible; a re-run is safe (a streaming query's restart runs the "
            "micro-batch again). Fix: run `kafka-eos recover` and `reset` only while no query or job uses the prefix.")

    def _refuse_unless_same_input(self, last: LogRecord, epoch: EpochId, tasks: Sequence[TaskCommit], epoch_input: EpochInput,
                                  session: TransactionClient, own: Sequence[PreparedTxnState]) -> None:
        """A replay is recognised by its epoch id, but only the same input makes it one: Spark plans a micro-batch
        again over other offsets when its checkpoint's offset log lost it, and a ``writeId`` may be re-run over other
        data. Such a run is refused before anything of it is visible."""
        why = self._replay_difference(last, epoch, tasks, epoch_input)
        if why is None:
            return
        abort_prepared(session, own)
        raise Ending.RUN_REFUSED.error(why)

    def _replay_difference(self, last: LogRecord, epoch: EpochId, tasks: Sequence[TaskCommit],
                           epoch_input: EpochInput) -> str | None:
        """The refusal of a replay of ``epoch`` whose input is not the one decided, or None."""
        refused = f"transactional.id.prefix '{self._prefix}' refused {epoch.describe()}"
        if epoch.kind == "batch":
            rows = last.batch_input_rows(epoch)
            if last.batch_input_dropped(epoch) and not _resumed_past(last, epoch, tasks):
                return (f"{refused}: writeId {epoch.run_id} is committed, but before the last {len(last.batch_inputs)} "
                        "batch jobs of this prefix, whose inputs are all its decision log keeps: this run's input "
                        f"({epoch_input.rows} rows) cannot be proven the same. Nothing of this run was written; what writeId "
                        f"{epoch.run_id} committed stays visible. Fix: if this is the same input, nothing needs doing (it "
                        "IS committed); if it is corrected or new data, to be written besides what is there, run it under "
                        "a new writeId.")
            if rows is None or _resumed_past(last, epoch, tasks):
                return None
            decided_digest = last.batch_input_digest(epoch)
            if rows != epoch_input.rows:
                differs = f"is committed over an input of {rows} rows, and this run's input has {epoch_input.rows} rows"
            elif decided_digest is not None and epoch_input.digest is not None and decided_digest != epoch_input.digest:
                differs = (f"is committed over {rows} rows, and this run's {epoch_input.rows} rows are other rows (their "
                           f"digest {epoch_input.digest} is not the decided {decided_digest})")
            elif last.input is not None and last.epoch == epoch and (other := input_difference(last.input, epoch_input)):
                differs = f"is committed over other input ({other})"
            else:
                return None
            return (f"{refused}: writeId {epoch.run_id} {differs}. Nothing of this run was written; what writeId "
                    f"{epoch.run_id} committed stays visible (Kafka cannot take it back), and a re-run with this writeId is "
                    "refused again. Fix: if this is corrected or new data, to be written besides what is there, run it "
                    "under a new writeId; if it should be the same input, find why it differs.")
        if last.epoch != epoch:
            return None  # recognised from an archived history, whose inputs are not kept
        offsets = _source_offsets(tasks)
        if last.input is not None:
            why = input_difference(last.input, epoch_input)
            decided, now = describe(last.input), describe(epoch_input)
        elif last.offsets and offsets and offsets != last.offsets:
            why, decided, now = "its source offsets differ", describe_offsets(last.offsets), describe_offsets(offsets)
        else:
            return None
        if why is None:
            return None
        batch = epoch.batch_id
        restore = ""
        if last.input is not None and last.input.source_end is not None:
            restore = (f" (its source lines, after the first two: {' | '.join(last.input.source_end)})")
        return (f"{refused}: Spark planned it again over other input than it was decided over ({why}). Decided: "
                f"{decided}. This run: {now}. Nothing of this run was committed; the decided output is visible once. "
                f"The checkpoint's offset log lost micro-batch {batch} (its offsets/{batch} deleted to reprocess it, an "
                "older snapshot restored, or a copy), and a restart as it stands is refused again. Fix: put the "
                f"checkpoint's offsets/{batch} back as it was{restore}, so that Spark replays what was decided and "
                "goes on from there; or start the query on a new checkpoint (and transactional.id.prefix) whose "
                "startingOffsets begin where the decided micro-batch ended.")

    def _wait_for_decision_in_flight(self, session: TransactionClient) -> None:
        """A live driver's decision commits within milliseconds of being written; one still open after
        :data:`DECISION_IN_FLIGHT_WAIT_S` is a crashed driver's, which the fence then aborts."""
        wait_until(lambda: self._coordinator_state(session) != TxnState.ONGOING, Deadline(DECISION_IN_FLIGHT_WAIT_S),
                   Backoff(0.01, 0.5))

    def _coordinator_state(self, session: TransactionClient) -> str:
        """The state of the prefix's coordinator transaction, as DescribeTransactions names it (a :class:`TxnState` value)."""
        coordinator_id = coordinator_transactional_id(self._prefix)
        try:
            return session.describe([coordinator_id])[coordinator_id].state
        except TxnSessionError as err:
            if err.error == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED":
                raise transactional_id_refused(self._options.connection, self._prefix) from None
            raise

    def _committed_before(self, session: TransactionClient, announced: bool = False) -> str | None:
        """What shows that the prefix committed a decision before, or None. The coordinator id's state does, unless
        a driver fenced it and died before its next commit (InitProducerId leaves it Empty); then a task id of the
        prefix in a committed state does: only a decision's phase 2 commits one. The broker keeps either for
        ``transactional.id.expiration.ms`` after its last transaction. ``announced``: the log holds a sweep's
        announcement for the prefix, which the coordinator id's commit may be."""
        coordinator_id = coordinator_transactional_id(self._prefix)
        if not announced and self._coordinator_state(session) in (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT):
            return f"its coordinator {coordinator_id} committed"
        listed = session.list_transactions(state_filters=(TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT), id_prefix=f"{self._prefix}-")
        committed = sorted(t.transactional_id for t in listed if parse_task_transactional_id(self._prefix, t.transactional_id))
        return f"its task transaction {committed[0]} committed" if committed else None

    def _last_before_fencing(self, decision_log: DecisionLog, session: TransactionClient,
                             own: Sequence[PreparedTxnState] = ()) -> LogRecord | None:
        """The prefix's last record, read before this driver fences the coordinator id. A prefix without a
        record whose coordinator id committed before (the broker keeps an id's last state for
        ``transactional.id.expiration.ms``, 7 days by default) had its history in a log that is gone: a
        fresh start would write replays again and sweep decided transactions, so it is refused."""
        last = decision_log.last(self._prefix)
        if last is not None:
            return last
        # A sweep's announcement commits the coordinator id on a prefix that still has no record.
        witness = self._committed_before(session, announced=bool(decision_log.sweep_announcement(self._prefix)))
        if witness is None:
            return None
        abort_prepared(session, own)
        raise KafkaEosDecisionLogError(
            f"The decision log '{self._options.decision_log_topic}' (option decisionLogTopic) has no record of "
            f"transactional.id.prefix '{self._prefix}', but that prefix has committed decisions ({witness}): the log "
            "that holds its history was deleted, re-created, or is another topic than before. "
            "Starting afresh would write Spark's replays of decided epochs again. Nothing was written. Fix: point "
            "decisionLogTopic at the prefix's log; or, if that log is gone for good and no epoch of the prefix is "
            f"left undecided, acknowledge the fresh start with `kafka-eos reset --bootstrap-servers ... --prefix "
            f"{self._prefix} --decision-log-topic {self._options.decision_log_topic} --yes`, and start the query on a "
            "new checkpoint (or a batch job under a new writeId): after the reset nothing remembers what the prefix "
            "decided, so a restart on the old checkpoint would write its replayed micro-batch again, and a re-run of "
            "an earlier writeId all of it."
        )

    def _refuse_unless_owner(self, judgement: Judgement, epoch: EpochId, session: TransactionClient,
                             own: Sequence[PreparedTxnState]) -> None:
        if judgement.verdict != Verdict.REFUSE:
            return
        abort_prepared(session, own)
        if judgement.fix:
            raise Ending.RUN_REFUSED.error(f"transactional.id.prefix '{self._prefix}' refused {epoch.describe()}: {judgement.reason}. "
                                           f"Nothing of it was committed. Fix: {judgement.fix}.")
        raise Ending.RUN_REFUSED.error(
            f"transactional.id.prefix '{self._prefix}' refused {epoch.describe()}: {judgement.reason}. Nothing of it "
            "was committed. Fix: give this query (or job) its own transactional.id.prefix; or, if the run that owns "
            "the prefix is gone for good (its checkpoint deleted), hand the prefix over with "
            f"`kafka-eos reset --bootstrap-servers ... --prefix {self._prefix}` (python -m spark_kafka_eos.cli reset ...)."
        )

    def _finish_replay(self, session: TransactionClient, decision_log: DecisionLog, last: LogRecord,
                       own: Sequence[PreparedTxnState]) -> None:
        """Spark re-ran an epoch that is already decided: its output is (being) committed, so this
        run's other transactions are duplicates and are aborted (first, so that they cannot linger
        if finishing the decision fails)."""
        decided = {p.txn for p in last.participants}
        duplicates = [t for t in own if t not in decided]
        abort_prepared(session, duplicates)
        finished = self._finish(session, decision_log, last, OPERATION_TIMEOUT_S)
        self._sweep(session, decision_log, finished, keep=())
        log.warning("Epoch %s of prefix %s was already decided: aborted %d duplicate transactions",
                    last.epoch_id, self._prefix, len(duplicates))

    def _verify(self, session: TransactionClient, participants: Sequence[Participant]) -> int:
        """Check every participant is still open; return the earliest deadline (broker clock, ms)."""
        states = session.describe([p.transactional_id for p in participants])
        problems = [
            f"{p.transactional_id} is {d.state} (producer {d.producer_id} epoch {d.producer_epoch}), not the open "
            f"transaction of producer {p.producer_id} epoch {p.producer_epoch}: it timed out or was fenced"
            for p in participants for d in [states[p.transactional_id]] if not is_open(p, d)
        ]
        if problems:
            self._abort_epoch(session, participants, "; ".join(problems))
        return min(d.transaction_start_time_ms + d.transaction_timeout_ms for d in states.values())

    def _decide_on_group(self, session: TransactionClient, decision_log: DecisionLog, decision: LogRecord,
                         starts: Sequence[Position], last: LogRecord | None, deadline_ms: int,
                         own: Sequence[PreparedTxnState]) -> None:
        """Decide; with a consumer group, under the group's claim (see :mod:`.group_claim`), comparing the group again
        after each claim lost to another writer's decision."""
        group_offsets = _group_offsets(decision)
        for attempt in range(1, CLAIM_ATTEMPTS + 1):
            claim = None
            if group_offsets:
                assert self._options.consumer_group is not None
                group = self._options.consumer_group
                claim = self._abort_on_error(session, own, lambda: GroupClaim.take(session, self._options.connection, group))
                self._abort_on_error(session, own, lambda: self._check_group(starts, group_offsets, last, decision_log))
            self._hooks.at(BEFORE_DECISION, session, decision)
            try:
                self._decide(session, decision_log, decision, group_offsets, deadline_ms, claim)
                return
            except GroupClaimLost as lost:
                log.warning("%s of prefix %s compares consumerGroup again (attempt %d): %s", decision.epoch.describe(),
                            self._prefix, attempt, lost)
        abort_prepared(session, own)
        raise Ending.RUN_REFUSED.error(
            f"The epoch was aborted (nothing of it is visible): other writers decided on consumerGroup "
            f"'{self._options.consumer_group}' each time this one compared it ({CLAIM_ATTEMPTS} times). A re-run is "
            "safe: it compares again. Fix: run one writer per consumerGroup at a time.")

    def _decide(self, session: TransactionClient, decision_log: DecisionLog, decision: LogRecord,
                group_offsets: dict[tuple[str, int], int] | None, deadline_ms: int, claim: GroupClaim | None = None) -> None:
        coordinator_id = coordinator_transactional_id(self._prefix)
        began = time.monotonic()

        def broker_now_ms() -> float:
            # The decision transaction started on the broker after ``began``: its start time plus the time
            # since ``began`` is at or past the broker's clock now (the driver's clock may be off).
            start_ms = session.describe([coordinator_id])[coordinator_id].transaction_start_time_ms
            return start_ms + (time.monotonic() - began) * 1000

        def in_time() -> None:
            now_ms = broker_now_ms()
            if now_ms > deadline_ms - DEADLINE_MARGIN_MS:
                raise _DeadlineTooNear(f"the earliest participant times out {max(deadline_ms - now_ms, 0) / 1000:.1f}s "
                                       f"after the decision would commit, less than the {DEADLINE_MARGIN_MS / 1000:g}s margin")

        # Commit retries stop with half the margin left: a decision later than that could outlive a participant.
        commit_by = began + max((deadline_ms - DEADLINE_MARGIN_MS / 2) / 1000 - time.time(), 0.0)
        def before_commit() -> None:
            in_time()
            if claim is not None:
                claim.hold()  # last: a claim taken after it waits, in its read of the group, for this commit

        try:
            decision_log.append(decision, group_offsets, before_commit=before_commit, commit_by=commit_by)
        except GroupClaimLost:
            raise  # the decision's transaction was aborted; the participants are still open, for the next compare
        except _DeadlineTooNear as late:
            self._abort_epoch(session, decision.participants, str(late))
        except RecordNotCommittedError as refused:
            _abort_undecided(session, decision, refused, Ending.DECISION_REFUSED)
        except Exception as err:
            self._settle_unknown_outcome(session, decision_log, decision, err)

    def _settle_unknown_outcome(self, session: TransactionClient, decision_log: DecisionLog, decision: LogRecord,
                                err: Exception) -> None:
        """The decision write failed: its outcome is whatever the log says. Fence first, the log's own producer
        too (a commit still in flight can then no longer land), then read it back. The operation goes on with
        the new producer: phase 2's completion, or the mark of a fence that committed nothing."""
        try:
            recorded = decision_log.fenced_last(self._prefix, anew=True)
        except Exception as unreadable:
            # Unknown outcome: abort nothing; abort() or the next recovery reads the log again.
            raise Ending.DECISION_UNREADABLE.error(
                f"The decision write failed ({err}) and the log could not be read back ({unreadable}); "
                "the epoch's fate is settled by the next recovery."
            ) from err
        if recorded is not None and recorded.kind == "decision" and recorded.epoch_id == decision.epoch_id \
                and recorded.participants == decision.participants:
            log.warning("Decision write reported %s, but the decision is in the log: going on", err)
            return
        if recorded is not None and recorded.last_decided(decision.epoch) == decision.epoch:
            # Decided, and a later record followed, written by a driver that finished this decision first. If
            # it decided these participants, they are committed and aborting them fails harmlessly; if another
            # copy of the run decided other ones, these are aborted.
            abort_prepared(session, [p.txn for p in decision.participants])
            raise Ending.DECIDED_AND_FOLLOWED.error(
                f"Epoch {decision.epoch_id} of prefix '{self._prefix}' IS COMMITTED (the log records it, and a later "
                f"record follows), though its decision write reported {err}. Do not re-run it: a re-run writes nothing more."
            ) from err
        _abort_undecided(session, decision, err, Ending.DECISION_NOT_IN_LOG)

    def _abort_epoch(self, session: TransactionClient, participants: Sequence[Participant], why: str) -> None:
        abort_prepared(session, [p.txn for p in participants])
        raise Ending.TOO_LATE.error(
            f"The epoch was aborted instead of committed, because not every task's transaction can still be committed: "
            f"{why}. Nothing of it is visible. Fix: the epoch ran longer than the transaction timeout allows; make epochs "
            "shorter (smaller micro-batches: maxOffsetsPerTrigger; or split a batch write), or raise "
            "kafka.transaction.timeout.ms up to the broker's transaction.max.timeout.ms."
        )

    def _abort_on_error(self, session: TransactionClient, own: Sequence[PreparedTxnState], check: Callable[[], T]) -> T:
        try:
            return check()
        except Exception:
            abort_prepared(session, own)
            raise

    def _finish_decided(self, session: TransactionClient, decision: LogRecord, deadline_ms: int) -> Deadline:
        """Phase 2 of the decision just taken, retried until the participants' deadline; returns what is left of
        that budget. Past the commit point, a failure must not read as "nothing was written": a re-run of a batch
        job would write everything twice."""
        # The driver's clock is good enough for a retry budget; deciding used the broker's.
        deadline = Deadline(max((deadline_ms - time.time() * 1000) / 1000, 1.0))
        try:
            self._roll_forward(session, decision, deadline, just_decided=True)
        except KafkaEosCommittedDataLostError:
            raise
        except Exception as err:
            raise Ending.PHASE2_UNFINISHED.error(
                f"Epoch {decision.epoch_id} of prefix '{self._prefix}' IS COMMITTED (its decision is in the log), but "
                f"phase 2 did not finish: {err}. Do not re-run it: the next start of a writer with this prefix (or "
                f"`kafka-eos recover --prefix {self._prefix} ...`) makes all of it visible."
            ) from err
        return deadline

    def _sweep_after_phase2(self, session: TransactionClient, decision_log: DecisionLog, decision: LogRecord,
                            listing: Future[list[TxnDescription]]) -> bool:
        """Abort what the decided epoch left open (failed and speculative attempts) before the commit returns: the
        next epoch's tasks open transactions as soon as it has, and a sweep after that would take theirs for
        lingering. ``listing``: the prefix's open transactions, listed after the decision. Its proof of ownership
        appends the decision's completion; returns whether it did."""
        completed = False
        attempts = 0

        def prove(batch: Sequence[TxnDescription]) -> None:
            nonlocal completed
            decision_log.append(replace(decision.completed(), aborting=_instances(batch)))
            completed = True

        def sweep() -> list[str]:
            nonlocal attempts
            attempts += 1
            listed = listing.result() if attempts == 1 else None  # a failed listing is raised and retried anew
            return abort_lingering(session, self._prefix, self._timeout_ms, prove, keep, listed)

        keep = [p.transactional_id for p in decision.participants]
        try:
            retry(lambda _: sweep(), Deadline.never(),
                  any_error, Backoff(0.5, math.inf), attempts=_SWEEP_ATTEMPTS)
        except Exception as err:  # noqa: BLE001 - clean-up only: the data is committed
            log.warning("Could not abort lingering transactions of %s after %s (%s): they pin the sink's LSO "
                        "until the next epoch of the prefix, `kafka-eos recover --prefix %s`, or their timeout",
                        self._prefix, decision.epoch_id, err, self._prefix)
        return completed

    def _finish(self, session: TransactionClient, decision_log: DecisionLog, record: LogRecord | None,
                budget_s: float) -> LogRecord | None:
        """Phase 2 of ``record`` if it is a decision, then its completion (:meth:`_roll_forward`, :meth:`_complete`).
        Returns the prefix's last record."""
        if record is None or record.kind != "decision":
            return record
        deadline = Deadline(budget_s)
        self._roll_forward(session, record, deadline, decision_log)
        return self._complete(decision_log, record, deadline)

    def _roll_forward(self, session: TransactionClient, decision: LogRecord, deadline: Deadline,
                      decision_log: DecisionLog | None = None, just_decided: bool = False) -> None:
        """Commit every participant of ``decision``, retrying failures until ``deadline``. Given the ``decision_log``
        (``decision`` is the prefix's last record, this driver fenced it): a participant whose probe lies above its
        partition's last stable offset cannot be told until the transaction that pins it ends; the prefix's other
        open transactions (a dead attempt's, say) are aborted then, in a sweep that proves ownership first.
        ``just_decided``: this driver's own decision, whose participants it saw open right before (the first
        attempt sends EndTxn without describing them first; a retry describes)."""
        attempts = 0

        def attempt(_: Deadline) -> None:
            nonlocal attempts
            attempts += 1
            try:
                roll_forward(session, decision, self._visible, just_decided and attempts == 1)
            except ProbesNotStableError:
                if decision_log is not None:
                    self._sweep(session, decision_log, decision, keep=[p.transactional_id for p in decision.participants])
                raise

        retry(attempt, deadline, lambda err: not isinstance(err, KafkaEosCommittedDataLostError), _PHASE2_BACKOFF,
              on_retry=lambda err, _: log.info("Phase 2 of %s failed (%s); retrying", decision.epoch_id, err))

    def _complete(self, decision_log: DecisionLog, decision: LogRecord, deadline: Deadline) -> LogRecord:
        """Append the completion of ``decision``, whose participants are all committed; returns the prefix's last
        record. A completion that cannot be written only warns: the data is all there, and the next epoch (or
        recovery) writes it."""
        completed = decision.completed()
        try:
            retry(lambda _: decision_log.append(completed), deadline, any_error, _PHASE2_BACKOFF,
                  attempts=_COMPLETION_ATTEMPTS)
        except Exception as err:  # noqa: BLE001 - the data is committed; only the bookkeeping is late
            log.warning("Epoch %s of prefix %s is committed, but its completion record could not be written "
                        "(%s); the next epoch or recovery writes it", decision.epoch_id, self._prefix, err)
            return decision
        return completed

    def _sweep(self, session: TransactionClient, decision_log: DecisionLog, last: LogRecord | None, keep: Sequence[str]) -> None:
        """Abort what is left open of the prefix. Ownership is proven after listing by re-appending the last
        record in the coordinator's transaction, which fails if another driver has fenced this one."""
        abort_lingering(session, self._prefix, self._timeout_ms, lambda batch: _prove(decision_log, self._prefix, last, batch), keep)

    # -- the operator's recovery ------------------------------------------------------------
    def recover(self, accept_data_loss: bool = False, decision_log: DecisionLog | None = None) -> RecoveryReport:
        """What the CLI's ``recover`` does: fence other drivers, roll the prefix's last decision forward,
        then abort everything of the prefix left open. Run it only when no query uses the prefix.
        Lost participants raise, unless ``accept_data_loss``: then they are reported. Given a ``decision_log``,
        it fences through that one, which then holds the fence (``reset`` appends through it)."""
        decision_log = self._log() if decision_log is None else decision_log
        with self._marked(decision_log), nullcontext(self._session_of(self._options.connection)) as session:
            self._last_before_fencing(decision_log, session)  # a lost log is refused here too, before its fence forgets it
            before = decision_log.fenced_last(self._prefix)
            lost: str | None = None
            all_lost = False
            try:
                last = self._finish(session, decision_log, before, OPERATION_TIMEOUT_S)
            except KafkaEosCommittedDataLostError as err:
                if not accept_data_loss:
                    raise
                lost, all_lost, last = str(err), err.all_lost, before
            aborted = abort_lingering(session, self._prefix, self._timeout_ms,
                                      lambda batch: _prove(decision_log, self._prefix, last, batch))
        return RecoveryReport(before, lost, aborted, all_lost)

    # -- abort ----------------------------------------------------------------------------
    def abort(self, epoch: EpochId, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Spark gave up on ``epoch`` (a task failed, or commit raised)."""
        own = [m.transaction for m in messages if isinstance(m, TaskCommit) and m.transaction is not None]
        decision_log = self._log()
        with self._marked(decision_log), nullcontext(self._session_of(self._options.connection)) as session:
            if judge(self._last_before_fencing(decision_log, session, own), epoch).verdict == Verdict.REFUSE:
                abort_prepared(session, own)  # not the owner: touch nothing else
                return
            last = decision_log.fenced_last(self._prefix)
            judgement = _judge(decision_log, last, epoch)
            if judgement.verdict == Verdict.REPLAY:
                assert last is not None
                self._finish_replay(session, decision_log, last, own)  # decided before the failure: it stands
                if epoch.kind == "batch":
                    # Whatever failed after the decision (the commit's error, or its Python worker's death) must not
                    # read as "nothing was written": a retry without writeId is a new job, and would write it all again.
                    # (A stream's restart replays the micro-batch, which is recognised.)
                    raise Ending.DECIDED_BEFORE_ABORT.error(
                        f"Epoch {epoch} of prefix '{self._prefix}' IS COMMITTED: its decision was taken before the "
                        "failure Spark reports with this error, and this abort finished it. Do not re-run it: all of its "
                        "records are visible (a re-run with the same writeId writes nothing more; one without would "
                        "write them again).")
                return
            abort_prepared(session, own)
            if judgement.verdict == Verdict.PROCEED:
                last = self._finish(session, decision_log, last, OPERATION_TIMEOUT_S)
                self._sweep(session, decision_log, last, keep=())
                self._sweep_stragglers(session, decision_log, last)

    def _sweep_stragglers(self, session: TransactionClient, decision_log: DecisionLog, last: LogRecord | None) -> None:
        """Spark calls abort() as soon as the job fails, while it still stops the epoch's other tasks: a task
        whose write returned just then prepares a transaction nobody will decide (its Python worker lives on,
        so its guard lets it go). Sweep again for :data:`STRAGGLER_GRACE_S`; each sweep proves ownership first,
        so a driver that took the prefix over since is never touched."""
        def swept() -> bool:
            self._sweep(session, decision_log, last, keep=())
            return False  # watched until the grace period ends

        try:
            wait_until(swept, Deadline(STRAGGLER_GRACE_S), Backoff(1.0))
        except Exception as err:  # noqa: BLE001 - the prefix is another driver's now, or the cluster is away
            log.warning("Stopped sweeping for straggling tasks of prefix %s (%s): what they left open is aborted by the "
                        "next epoch or run of the prefix, `kafka-eos recover --prefix %s`, or its timeout", self._prefix, err, self._prefix)

    @contextmanager
    def _marked(self, decision_log: DecisionLog) -> Iterator[None]:
        """Run an operation; then, whether it succeeded or failed, leave the coordinator id committed if the
        operation fenced it anew on a prefix with history and committed nothing (see
        :meth:`DecisionLog.keep_history_mark`). A process that dies leaves no mark: then the prefix's committed
        task ids tell a lost log from a new prefix (:meth:`_committed_before`)."""
        try:
            yield
        except Exception:
            self._keep_history_mark(decision_log)
            raise
        self._keep_history_mark(decision_log)

    def _keep_history_mark(self, decision_log: DecisionLog) -> None:
        try:
            decision_log.keep_history_mark(self._prefix)
        except Exception as err:  # noqa: BLE001 - fenced by another driver (which then leaves its own), or the cluster is away
            log.warning("Could not leave prefix %s's coordinator committed after this operation (%s): should its decision "
                        "log be lost before the prefix's next operation, a re-run is refused only while a task id of the "
                        "prefix shows a commit", self._prefix, err)

    def _log(self) -> DecisionLog:
        decision_log = self._open_log(self._options)
        decision_log.ensure_topic()
        return decision_log


GROUP_SETTLE_WAIT_S = 10.0
"""How long a decision found on a group is given to finish its own phase 2 before it is rolled forward here."""


def settle_group(connection: KafkaConnection, group: str, committed: Sequence[KafkaTopicPartition],
                 own: tuple[str, str] | None = None) -> None:
    """Whoever resumes from ``group`` calls this with its committed offsets: every decision that moved
    them (but ``own``: (log topic, prefix) of the caller, whose last decision it finishes itself) is
    finished, rolled forward here if its driver does not within :data:`GROUP_SETTLE_WAIT_S`; else a
    loud error. The group then never points past records that can still be lost."""
    markers = sorted({m for tp in committed for m in [GroupMarker.parse(tp.metadata)] if m is not None
                      and (m.log_topic, m.prefix) != own})
    for marker in markers:
        _settle_marker(connection, group, marker)


def _settle_marker(connection: KafkaConnection, group: str, marker: GroupMarker) -> None:
    options = WriterOptions(connection, None, marker.prefix, "option", marker.log_topic, None, None, dict(connection.settings))
    fix = (f"Fix: kafka-eos recover --bootstrap-servers {connection.bootstrap_servers} --prefix {marker.prefix} "
           f"--decision-log-topic {marker.log_topic}")
    if marker.log_topic not in cluster_metadata(connection).topics:
        raise Ending.RUN_REFUSED.error(
            f"consumerGroup '{group}' was moved by {marker.epoch_id} of prefix '{marker.prefix}', but its decision log "
            f"'{marker.log_topic}' no longer exists: nothing can tell whether the records before the group's offsets "
            "were committed. Nothing was read or written. Fix: check that prefix's output, then clear the mark with "
            f"kafka-consumer-groups --group {group} --reset-offsets --to-current --all-topics --execute."
        )
    decision_log = KafkaDecisionLog(options)

    def settled() -> bool:
        # Finished (a later record follows only a finished decision), or reset with its recovery.
        last = decision_log.last(marker.prefix)
        if last is None:
            raise Ending.RUN_REFUSED.error(
                f"consumerGroup '{group}' was moved by {marker.epoch_id} of prefix '{marker.prefix}', but its decision log "
                f"'{marker.log_topic}' has no record of that prefix (the log was deleted and re-created, or compacted "
                "away): nothing can tell whether the records before the group's offsets were committed. Nothing was "
                "read or written. Fix: check that prefix's output; then, if it is all there, clear the mark with "
                f"kafka-consumer-groups --group {group} --reset-offsets --to-current --all-topics --execute."
            )
        return last.epoch_id != marker.epoch_id or last.kind != "decision"

    if wait_until(settled, Deadline(GROUP_SETTLE_WAIT_S), Backoff(0.5)):
        return
    log.warning("consumerGroup %s points past %s of prefix %s, whose phase 2 has not finished: rolling it forward",
                group, marker.epoch_id, marker.prefix)
    try:
        TwoPhaseCommitCoordinator(options, COORDINATOR_TRANSACTION_TIMEOUT_MS).prepare()
    except KafkaEosCommittedDataLostError as lost:
        raise KafkaEosCommittedDataLostError(f"consumerGroup '{group}' points past records that are lost: {lost}") from lost
    except Exception as err:
        raise Ending.GROUP_NOT_SETTLED.error(
            f"consumerGroup '{group}' points past records of {marker.epoch_id} of prefix '{marker.prefix}' that are "
            f"decided but not yet visible, and rolling that decision forward failed: {err}. Nothing was read or "
            f"written. {fix}"
        ) from err


@dataclass(frozen=True)
class RecoveryReport:
    """What :meth:`TwoPhaseCommitCoordinator.recover` found and did."""

    last_before: LogRecord | None
    data_loss: str | None
    aborted: list[str]
    all_lost: bool = False
    """``data_loss`` concerns every participant of ``last_before``: none of its records is visible."""


def _judge(decision_log: DecisionLog, last: LogRecord | None, epoch: EpochId) -> Judgement:
    """:func:`~spark_kafka_eos._internal.write.ownership.judge`, with the prefix's archived runs: a run older than the history
    its last record carries is remembered there. Consulted only where the last record lets the epoch proceed."""
    judgement = judge(last, epoch)
    if judgement.verdict != Verdict.PROCEED or last is None or not last.archives or last.last_decided(epoch) is not None:
        return judgement
    remembered = _archived_epochs(decision_log, last, epoch)
    if not remembered:
        return judgement
    latest = remembered[-1]
    if epoch.kind == "batch":
        return Judgement(Verdict.REPLAY)
    # A micro-batch's input is kept only while it is the prefix's last record: an archived one can no longer be
    # proven the same input, so its replay is refused as ownership.judge refuses a remembered one.
    if latest.batch_id is not None and epoch.batch_id is not None and epoch.batch_id <= latest.batch_id:
        return Judgement(Verdict.REFUSE, f"it decided {latest.describe()} (an archived run), and this is that query again at "
                                         f"micro-batch {epoch.batch_id}: a replay that can no longer be recognised")
    return judgement


def _archived_epochs(decision_log: DecisionLog, last: LogRecord, epoch: EpochId) -> list[EpochId]:
    """The epochs of ``epoch``'s run that ``last``'s archives remember, oldest first."""
    archived = (EpochId.parse(run) for run, _ in decision_log.archived_runs(last))
    return [remembered for remembered in archived if remembered.run_key == epoch.run_key]


def _abort_undecided(session: TransactionClient, decision: LogRecord, err: Exception, ending: Ending) -> None:
    """The decision is certainly not in the log: abort its participants, so that nothing pins the LSO."""
    abort_prepared(session, [p.txn for p in decision.participants])
    raise ending.error(f"The decision could not be written, so the epoch was aborted (nothing of it is visible): {err}") from err


def _prove(decision_log: DecisionLog, prefix: str, last: LogRecord | None, batch: Sequence[TxnDescription]) -> None:
    """Commit a coordinator transaction that names the ``batch`` about to be aborted (the last record appended again;
    on a prefix with none, an announcement beside it): it fails if another driver fenced this one."""
    if last is not None:
        decision_log.append(replace(last, aborting=_instances(batch)))
    else:
        decision_log.prove_owner(prefix, _instances(batch))


def _instances(batch: Sequence[TxnDescription]) -> tuple[tuple[str, int, int], ...]:
    return tuple((d.transactional_id, d.producer_id, d.producer_epoch) for d in batch)


def _session_checkpoint(tasks: Sequence[TaskCommit], query_id: str) -> str | None:
    """The checkpoint the epoch's tasks found from the session's conf, if they all found the same one and its
    ``metadata`` names the query."""
    found = {t.checkpoint_location for t in tasks}
    location = found.pop() if len(found) == 1 else None
    return location if location is not None and names_query(location, query_id) else None


_WARNED_DIGEST_ONLY: set[str] = set()


def _warn_proven_by_digest_alone(prefix: str, checkpoint_location: str | None) -> None:
    """Once a process and prefix: a stream whose offset log the sink cannot read has its replays proven by the rows'
    digest alone, which refuses the replay of a query that is not a function of its input."""
    if prefix in _WARNED_DIGEST_ONLY:
        return
    _WARNED_DIGEST_ONLY.add(prefix)
    where = (f"the sink cannot read Spark's offset log under {checkpoint_location}" if checkpoint_location else
             "the query's checkpoint is neither an option of the sink nor found from the session's "
             "spark.sql.streaming.checkpointLocation and the query's name")
    log.warning("Prefix %s: %s, so a replay of a micro-batch is proven by the digest of the rows it writes alone: a "
                "query whose output is not a function of its input (a uuid() column) has its replays "
                "refused. Fix: give the sink .option(\"checkpointLocation\", ...), or the query a .queryName(...) under the session's "
                "checkpoint, at a path the driver's Python can read",
                prefix, where)


def _task_commits(messages: Sequence[WriterCommitMessage | None], epoch: EpochId) -> list[TaskCommit]:
    tasks = [m for m in messages if isinstance(m, TaskCommit)]
    strangers = sorted({t.epoch_id for t in tasks} - {str(epoch)})
    if strangers:
        raise Ending.STRANGER_TASKS.error(f"Tasks of epoch(s) {strangers} were handed to the commit of {epoch}: a bug; nothing was committed.")
    return tasks


def _group_positions_elsewhere(decision_log: DecisionLog, group: str, prefix: str) -> dict[tuple[str, int], int]:
    """Where the other prefixes of the decision log last committed ``group``, per partition (the highest)."""
    records, _ = decision_log.records_since(0)
    latest = {record.prefix: record for record in records if record.prefix != prefix}
    positions: dict[tuple[str, int], int] = {}
    for record in latest.values():
        for tp, offset in record.group_position(group).items():
            positions[tp] = max(offset, positions.get(tp, offset))
    return positions


def _resumed_past(last: LogRecord, epoch: EpochId, tasks: Sequence[TaskCommit]) -> bool:
    """A re-run of the batch job ``last`` decided, which committed its source offsets to a consumerGroup, that read
    only from where that decision moved the group (the orchestrator's retry of a job that resumes from its group):
    not other input, but what came after it, which the group still points at for the next run."""
    if last.epoch != epoch or not last.consumer_group or not last.offsets:
        return False
    decided_ends = {(t, p): o for t, p, o in last.offsets}
    starts = _merged((task.source_starts for task in tasks), min)
    if any(start < decided_ends.get(tp, start) for tp, start in starts.items()):
        return False
    if starts:
        log.warning("%s is committed; this re-run read only records after the ones it decided, which it does not write: "
                    "consumerGroup %s still points at them for the next run", epoch.describe(), last.consumer_group)
    return True


def _source_offsets(tasks: Sequence[TaskCommit]) -> tuple[tuple[str, int, int], ...]:
    """The next offset to consume per source partition: the highest over all tasks."""
    return tuple((t, p, o) for (t, p), o in sorted(_merged((task.source_offsets for task in tasks), max).items()))


def _merged(positions: Iterable[Sequence[tuple[str, int, int]]], pick: Callable[[int, int], int]) -> dict[tuple[str, int], int]:
    """One offset per source partition out of every task's, chosen by ``pick`` (min or max)."""
    merged: dict[tuple[str, int], int] = {}
    for task_positions in positions:
        for topic, partition, offset in task_positions:
            merged[(topic, partition)] = pick(offset, merged.get((topic, partition), offset))
    return merged


def _group_offsets(decision: LogRecord) -> dict[tuple[str, int], int] | None:
    if not decision.consumer_group or not decision.offsets:
        return None
    return {(t, p): o for t, p, o in decision.offsets}
