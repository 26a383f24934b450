"""The driver as two-phase-commit coordinator of one Spark epoch (a micro-batch, or a batch job).

Tasks prepared their transactions (produced and flushed, left open). ``commit``:

1. reads the decision log for the prefix;
2. a replay of an epoch already decided is rolled forward and this run's transactions aborted;
3. an epoch older than the last decided one (a new checkpoint on an old prefix) is refused;
4. verifies every participant (DescribeTransactions): Ongoing, same producer id and epoch, and
   enough time left before its transaction timeout; otherwise everything is aborted;
5. decides: the decision record (and the consumer group's offsets) commit in the coordinator's
   own transaction. This is the commit point;
6. phase 2: EndTxn(commit) for every participant, in parallel, then records completion;
7. aborts lingering transactions of the prefix (failed and speculative attempts).

``abort`` consults the log first: a decided epoch is rolled forward, never aborted.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, Sequence

from pyspark.sql.datasource import WriterCommitMessage

from spark_kafka_eos.errors import KafkaEosCommitError, KafkaEosCommittedDataLostError, KafkaEosError
from spark_kafka_eos.txn.session import TransactionSession, TxnState
from spark_kafka_eos.write.commit_message import TaskCommit
from spark_kafka_eos.write.decision_log import DecisionLog
from spark_kafka_eos.write.log_record import LogRecord, Participant
from spark_kafka_eos.write.recovery import abort_lingering, abort_prepared, complete
from spark_kafka_eos.write.writer_options import WriterOptions

log = logging.getLogger(__name__)

VERIFY_MARGIN_MS = 10_000
"""A participant must have at least this long left before its transaction times out, or the
epoch is aborted rather than decided: phase 2 has to reach it in time."""
TASK_FAULT_POINT = "task_write"
FAULT_POINTS = ("before_decision", "after_decision", "during_phase2", TASK_FAULT_POINT)
"""Test-only option ``testing.failAt``: ``<point>`` raises there, ``<point>:kill-driver`` kills the
driver JVM there (coordinator points), ``task_write:kill`` kills a task's Python worker."""


class KafkaEosInjectedFault(KafkaEosError):
    """Raised at a named point when the test-only option ``testing.failAt`` asks for it."""


def open_session(options: WriterOptions) -> TransactionSession:
    """A coordinator-RPC session with the write's connection (bootstrap and security) settings."""
    return TransactionSession(options.bootstrap_servers, options.connection_config())


class TwoPhaseCommitCoordinator:
    """Commits or aborts one epoch of a prefix. Stateless between epochs: its state is in Kafka."""

    def __init__(self, options: WriterOptions, transaction_timeout_ms: int, fail_at: Optional[str] = None) -> None:
        self._options = options
        self._timeout_ms = transaction_timeout_ms
        self._fail_at = fail_at
        self._prefix = options.prefix

    # -- commit ---------------------------------------------------------------------------
    def commit(self, epoch_id: str, messages: Sequence[Optional[WriterCommitMessage]]) -> None:
        tasks = _task_commits(messages)
        with self._epoch(epoch_id, tasks) as (session, decision_log, last):
            if session is None:
                return
            self._refuse_older_epoch(session, last, epoch_id, tasks)
            complete(session, decision_log, last)
            participants = tuple(
                Participant(t.transaction.transactional_id, t.transaction.producer_id, t.transaction.epoch, t.spark_partition, t.records)
                for t in tasks
                if t.transaction is not None
            )
            if not participants:
                abort_lingering(session, self._prefix, self._timeout_ms)
                return
            self._verify(session, participants)
            self._fault("before_decision")
            decision = LogRecord(
                "decision", self._prefix, epoch_id, participants, self._options.consumer_group, _source_offsets(tasks)
            )
            self._decide(session, decision_log, decision)
            self._fault("after_decision")
            if self._fail_at is not None and self._fail_at.startswith("during_phase2"):
                self._partial_phase2(session, decision)
            self._finish_decided(session, decision_log, decision)
        log.info("Committed %s of prefix %s: %d participants", epoch_id, self._prefix, len(participants))

    def _finish_decided(self, session: TransactionSession, decision_log: DecisionLog, decision: LogRecord) -> None:
        """Phase 2 and clean-up of a decided epoch. Past the commit point, a failure must not read as
        "nothing was written": a re-run of a batch job would write everything twice."""
        try:
            complete(session, decision_log, decision)
        except KafkaEosCommittedDataLostError:
            raise
        except Exception as err:
            raise KafkaEosCommitError(
                f"Epoch {decision.epoch_id} of prefix '{self._prefix}' IS COMMITTED (its decision is in the log), but "
                f"phase 2 did not finish: {err}. Do not re-run it: the next start of a writer with this prefix (or "
                f"`python -m spark_kafka_eos.cli recover --prefix {self._prefix} ...`) makes all of it visible."
            ) from err
        try:
            abort_lingering(session, self._prefix, self._timeout_ms)
        except Exception as err:  # noqa: BLE001 - clean-up only; the next epoch retries it
            log.warning("Could not abort lingering transactions of %s after %s: %s", self._prefix, decision.epoch_id, err)

    def _finish_replay(self, session: TransactionSession, decision_log: DecisionLog, last: LogRecord, tasks: list[TaskCommit]) -> None:
        """Spark re-ran an epoch that is already decided: its output is (being) committed, so
        this run's transactions are duplicates and are aborted (first, so that they cannot linger
        if finishing the decision fails)."""
        decided = {p.transactional_id: (p.producer_id, p.epoch) for p in last.participants}
        duplicates = [
            t.transaction for t in tasks
            if t.transaction is not None
            and decided.get(t.transaction.transactional_id) != (t.transaction.producer_id, t.transaction.epoch)
        ]
        abort_prepared(session, duplicates)
        complete(session, decision_log, last)
        abort_lingering(session, self._prefix, self._timeout_ms)
        log.warning("Epoch %s of prefix %s was already decided: aborted %d duplicate transactions", last.epoch_id, self._prefix, len(duplicates))

    def _refuse_older_epoch(self, session: TransactionSession, last: Optional[LogRecord], epoch_id: str, tasks: list[TaskCommit]) -> None:
        batch_id = _batch_id(epoch_id)
        if last is None or batch_id is None or last.batch_id is None or batch_id > last.batch_id:
            return
        abort_prepared(session, [t.transaction for t in tasks if t.transaction is not None])
        raise KafkaEosCommitError(
            f"transactional.id.prefix '{self._prefix}' already committed micro-batch {last.batch_id}, but this query "
            f"is at micro-batch {batch_id}: a new checkpoint is reusing the prefix of an older query. Nothing of this "
            "batch was committed. Fix: give this query its own transactional.id.prefix (or leave it unset to derive "
            f"one from checkpointLocation), or, if the old query is gone for good, reset the prefix with "
            f"`python -m spark_kafka_eos.cli reset --bootstrap-servers ... --prefix {self._prefix}`."
        )

    def _verify(self, session: TransactionSession, participants: Sequence[Participant]) -> None:
        states = session.describe([p.transactional_id for p in participants])
        now_ms = int(time.time() * 1000)
        problems = []
        for p in participants:
            d = states[p.transactional_id]
            if d.state != TxnState.ONGOING or (d.producer_id, d.producer_epoch) != (p.producer_id, p.epoch):
                problems.append(f"{p.transactional_id} is {d.state} (producer {d.producer_id} epoch {d.producer_epoch}), "
                                f"not the open transaction of producer {p.producer_id} epoch {p.epoch}: it timed out or was fenced")
                continue
            left_ms = d.transaction_timeout_ms - (now_ms - d.transaction_start_time_ms)
            if left_ms < VERIFY_MARGIN_MS:
                problems.append(f"{p.transactional_id} has {max(left_ms, 0) / 1000:.1f}s left of its "
                                f"{d.transaction_timeout_ms / 1000:g}s transaction timeout")
        if problems:
            abort_prepared(session, [p.state for p in participants])
            raise KafkaEosCommitError(
                "The epoch was aborted instead of committed, because not every task's transaction can still be "
                f"committed: {'; '.join(problems)}. Nothing of it is visible. Fix: the epoch ran longer than the "
                "transaction timeout allows; make epochs shorter (smaller micro-batches: maxOffsetsPerTrigger; or "
                "split a batch write), or raise kafka.transaction.timeout.ms up to the broker's transaction.max.timeout.ms."
            )

    def _decide(self, session: TransactionSession, decision_log: DecisionLog, decision: LogRecord) -> None:
        try:
            decision_log.append(decision, _group_offsets(decision))
        except Exception as err:
            # The outcome is whatever the log says: read it back rather than guess.
            try:
                recorded = decision_log.last(self._prefix)
            except Exception as unreadable:
                # Unknown outcome: abort nothing; abort() or the next recovery reads the log again.
                raise KafkaEosCommitError(
                    f"The decision write failed ({err}) and the log could not be read back ({unreadable}); "
                    "the epoch's fate is settled by the next recovery."
                ) from err
            if recorded is not None and recorded.epoch_id == decision.epoch_id and recorded.participants == decision.participants:
                log.warning("Decision write reported %s, but the decision is in the log: going on", err)
                return
            abort_prepared(session, [p.state for p in decision.participants])
            raise KafkaEosCommitError(f"The decision could not be written, so the epoch was aborted: {err}") from err

    def _partial_phase2(self, session: TransactionSession, decision: LogRecord) -> None:
        first = decision.participants[0]
        session.commit(first.state)
        self._fault("during_phase2")

    def _fault(self, point: str) -> None:
        if self._fail_at is None:
            return
        wanted, _, mode = self._fail_at.partition(":")
        if wanted != point:
            return
        if mode == "kill-driver":
            _kill_driver_jvm()
        raise KafkaEosInjectedFault(f"Injected fault at {point} (testing.failAt)")

    # -- abort ----------------------------------------------------------------------------
    def abort(self, epoch_id: str, messages: Sequence[Optional[WriterCommitMessage]]) -> None:
        tasks = _task_commits(messages)
        with self._epoch(epoch_id, tasks) as (session, decision_log, last):
            if session is None:
                return  # decided before the failure: the decision stands, and was rolled forward
            abort_prepared(session, [t.transaction for t in tasks if t.transaction is not None])
            # An unfinished decision of another epoch is rolled forward, never swept up as lingering.
            complete(session, decision_log, last)
            abort_lingering(session, self._prefix, self._timeout_ms)

    @contextmanager
    def _epoch(
        self, epoch_id: str, tasks: list[TaskCommit]
    ) -> Iterator[tuple[Optional[TransactionSession], DecisionLog, Optional[LogRecord]]]:
        """Open the log and a session for an epoch and read the prefix's last record. An epoch that
        is already decided is finished here (rolled forward, this run's duplicates aborted) and the
        caller gets no session: there is nothing left to decide."""
        decision_log = DecisionLog(self._options)
        decision_log.ensure_topic()
        # Fence any other driver of the prefix before reading what it may have decided.
        decision_log.fence(self._prefix)
        with open_session(self._options) as session:
            last = decision_log.last(self._prefix)
            if last is not None and last.epoch_id == epoch_id:
                self._finish_replay(session, decision_log, last, tasks)
                yield None, decision_log, last
            else:
                yield session, decision_log, last


def _task_commits(messages: Sequence[Optional[WriterCommitMessage]]) -> list[TaskCommit]:
    return [m for m in messages if isinstance(m, TaskCommit)]


def _batch_id(epoch_id: str) -> Optional[int]:
    kind, _, value = epoch_id.partition(":")
    return int(value) if kind == "stream" else None


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


def _kill_driver_jvm() -> None:
    """SIGKILL the Spark driver JVM this Python worker descends from: a real driver crash."""
    pid = os.getpid()
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if b"java" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGKILL)
            os._exit(1)
    raise KafkaEosInjectedFault("testing.failAt asked to kill the driver, but no JVM parent was found")
