"""Recovery of a prefix: roll its last decision forward; abort transactions nobody will decide.

Roll-forward runs on the driver in ``streamWriter()`` / ``writer()``, which Spark calls before the
tasks of each epoch start: a decided participant is committed before a task can re-initialise its
transactional id (which would abort it). Spark also calls ``streamWriter()`` in the process that
commits a batch, after its tasks ran, so recovery there must not abort open task transactions: they
may be that batch's participants. Lingering transactions are aborted by commit and abort, which
know the participants. Every step is idempotent.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Optional

from spark_kafka_eos.errors import KafkaEosCommittedDataLostError
from spark_kafka_eos.txn.session import (
    PreparedTxnState,
    TransactionSession,
    TxnDescription,
    TxnFencedError,
    TxnInvalidStateError,
    TxnSessionError,
    TxnState,
)
from spark_kafka_eos.write.decision_log import DecisionLog
from spark_kafka_eos.write.log_record import LogRecord, Participant
from spark_kafka_eos.write.transactional_id import belongs_to_prefix

log = logging.getLogger(__name__)

_COMMITTED = (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
_PARALLELISM = 8


def roll_forward(session: TransactionSession, decision: LogRecord) -> None:
    """Commit every participant of ``decision`` that is still open; fail loudly if one was aborted."""
    participants = {p.transactional_id: p for p in decision.participants}
    states = session.describe(list(participants))
    lost = [(p, states[p.transactional_id]) for p in participants.values() if not _committable(p, states[p.transactional_id])]
    open_ones = [p for p in participants.values() if _is_open(p, states[p.transactional_id])]
    with ThreadPoolExecutor(max_workers=_PARALLELISM) as pool:
        failures = [f for f in pool.map(lambda p: _commit(session, p), open_ones) if f is not None]
    lost.extend(failures)
    if lost:
        details = "; ".join(f"{p.transactional_id} ({p.describe_output()}): now {d.state}, producer {d.producer_id} epoch {d.producer_epoch}" for p, d in lost)
        raise KafkaEosCommittedDataLostError(
            f"Decision {decision.epoch_id} of prefix '{decision.prefix}' was committed, but some of its participant "
            f"transactions were aborted before they could be committed, so their records are LOST: {details}. "
            "This happens when phase 2 (or recovery) comes after the participants' transaction.timeout.ms. "
            "Re-run that epoch's input for the partitions named, and raise kafka.transaction.timeout.ms "
            "(up to the broker's transaction.max.timeout.ms) or restart failed queries sooner."
        )
    # No need to wait for the markers: once PrepareCommit is logged the coordinator finishes the
    # commit, and a task re-initialising the id waits for that (CONCURRENT_TRANSACTIONS, retried).


def _is_open(p: Participant, d: TxnDescription) -> bool:
    return d.state == TxnState.ONGOING and (d.producer_id, d.producer_epoch) == (p.producer_id, p.epoch)


def _committable(p: Participant, d: TxnDescription) -> bool:
    return _is_open(p, d) or (d.state in _COMMITTED and (d.producer_id, d.producer_epoch) == (p.producer_id, p.epoch))


def _commit(session: TransactionSession, p: Participant) -> Optional[tuple[Participant, TxnDescription]]:
    try:
        session.commit(p.state)
        return None
    except (TxnFencedError, TxnInvalidStateError):
        # Committed meanwhile by someone else is fine, aborted is not. Transient errors (timeouts,
        # a broker restarting) propagate instead: they say nothing about the participant.
        now = session.describe([p.transactional_id])[p.transactional_id]
        return None if _committable(p, now) and now.state in _COMMITTED else (p, now)


def abort_prepared(session: TransactionSession, states: Iterable[PreparedTxnState]) -> None:
    """Abort exactly these transactions (by producer id and epoch) if they are still open."""
    def abort(state: PreparedTxnState) -> None:
        try:
            session.abort(state)
        except TxnSessionError as err:
            log.info("Not aborting %s: %s", state.transactional_id, err)

    with ThreadPoolExecutor(max_workers=_PARALLELISM) as pool:
        list(pool.map(abort, states))


def abort_lingering(session: TransactionSession, prefix: str, transaction_timeout_ms: int, keep: Iterable[str] = ()) -> list[str]:
    """Abort and fence every open transaction of ``prefix`` (task ids and the coordinator's) except
    ``keep``: failed and speculative attempts, and zombies of earlier runs. Returns the ids aborted."""
    kept = set(keep)
    doomed = sorted(
        t.transactional_id
        for t in session.list_transactions(state_filters=[TxnState.ONGOING.value])
        if t.transactional_id not in kept and belongs_to_prefix(prefix, t.transactional_id)
    )
    with ThreadPoolExecutor(max_workers=_PARALLELISM) as pool:
        # InitProducerId aborts the open transaction and bumps the epoch: a zombie still writing is fenced.
        list(pool.map(lambda txn_id: session.init_producer_id(txn_id, transaction_timeout_ms), doomed))
    if doomed:
        log.warning("Aborted lingering transactions of prefix %s: %s", prefix, ", ".join(doomed))
        session.wait_settled(doomed)
    return doomed


def recover(session: TransactionSession, decision_log: DecisionLog, prefix: str) -> Optional[LogRecord]:
    """Roll the last decision of ``prefix`` forward and record its completion. Returns the
    prefix's last log record."""
    return complete(session, decision_log, decision_log.last(prefix))


def complete(session: TransactionSession, decision_log: DecisionLog, record: Optional[LogRecord]) -> Optional[LogRecord]:
    """If ``record`` is a decision: roll it forward and append its completion, which is returned.
    Any other record is returned as it is."""
    if record is None or record.kind != "decision":
        return record
    roll_forward(session, record)
    completed = record.completed()
    decision_log.append(completed)
    return completed
