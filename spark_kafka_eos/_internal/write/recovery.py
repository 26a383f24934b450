"""Recovery of a prefix: roll a decision forward; abort transactions nobody will decide.

Every step is idempotent and safe to repeat. Two rules keep a superseded driver (a zombie, or an
orchestrator's earlier run) from harming the prefix's owner:

- transactions are only ever aborted by their exact producer id and epoch, as they were seen;
- lingering transactions are listed *before* the caller proves it still owns the prefix (a coordinator
  transaction that commits), and only what was listed is aborted. The owner fences the coordinator id
  before it decides, and once fenced the proof fails;
- the proof is taken again before every :data:`ABORTS_PER_PROOF` aborts: a stream's tasks open their
  transactions before their driver fences, so a sweep may list a newer driver's prepared participants,
  and that driver may decide them while the sweep is still aborting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from spark_kafka_eos._internal.decision_log.coordinator_id import coordinator_transactional_id
from spark_kafka_eos._internal.decision_log.records import LogRecord, Participant
from spark_kafka_eos._internal.txn.protocol import TransactionClient
from spark_kafka_eos._internal.txn.session import (
    PreparedTxnState,
    TxnDescription,
    TxnFencedError,
    TxnInvalidStateError,
    TxnSessionError,
    TxnState,
)
from spark_kafka_eos._internal.write.transactional_id import belongs_to_prefix
from spark_kafka_eos._internal.write.visibility import ProbeNotStable, ProbeRemoved
from spark_kafka_eos.errors import (
    KafkaEosCommitOutcomeUnknownError,
    KafkaEosCommittedDataLostError,
    KafkaEosOutputUnverifiableError,
)

log = logging.getLogger(__name__)

_COMMITTED = (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
_PARALLELISM = 8
ABORTS_PER_PROOF = _PARALLELISM
"""Aborts a sweep sends (in parallel) after one proof of ownership; the next ones wait for a new proof."""
VisibilityCheck = Callable[[Participant], bool]
"""True if the participant's records are visible to a read_committed reader."""
T = TypeVar("T")
Item = TypeVar("Item")


def roll_forward(session: TransactionClient, decision: LogRecord, visible: VisibilityCheck, just_decided: bool = False) -> None:
    """Commit every participant of ``decision`` that is still open. A participant that can no longer be
    committed is lost only if its records are not visible either; that fails loudly. ``just_decided``: the
    caller saw every participant open right before it decided, so EndTxn goes to each at once, and only one
    that refuses it is described (EndTxn by exact producer id and epoch commits nothing else)."""
    participants = {p.transactional_id: p for p in decision.participants}
    if just_decided:
        unsure: list[tuple[Participant, TxnDescription]] = []
        open_ones = list(participants.values())
    else:
        states = session.describe(list(participants))
        unsure = [(p, states[p.transactional_id]) for p in participants.values() if not committable(p, states[p.transactional_id])]
        open_ones = [p for p in participants.values() if is_open(p, states[p.transactional_id])]
    unsure += [f for f in _in_parallel(lambda p: _commit(session, p), open_ones) if f is not None]
    # An id reused since (librdkafka bumps the epoch for every new producer) says nothing about this
    # decision: its records tell.
    lost, unverifiable, unstable = [], [], []
    for p, d in unsure:
        try:
            if p.probe is None or not visible(p):
                lost.append((p, d))
        except ProbeRemoved as removed:
            unverifiable.append((p, d, str(removed)))
        except ProbeNotStable as pinned:
            unstable.append((p, d, str(pinned)))
    unverifiable_note = "; ".join(f"{_describe(p, d)}: cannot be told, {why}" for p, d, why in unverifiable)
    if lost:
        all_lost = len(lost) == len(participants)
        reset = f"`kafka-eos reset --bootstrap-servers ... --prefix {decision.prefix} --decision-log-topic <decisionLogTopic> --yes --accept-data-loss`"
        group = (f" (it moved consumerGroup '{decision.consumer_group}' past its input: "
                 + ("the reset moves the group back to where the epoch started, so a re-run from the group reads it again)"
                    if all_lost and decision.starts else "move the group back to where the epoch started, with "
                    "kafka-consumer-groups --reset-offsets, before the re-run)") if decision.consumer_group else "")
        rerun = (f"None of its records is visible: after {reset} (which forgets this epoch), re-run it whole{group}" if all_lost else
                 f"Re-run that epoch's input for the partitions named only (a batch job: under a new writeId{group}), after {reset}")
        error = KafkaEosCommittedDataLostError(
            f"Decision {decision.epoch_id} of prefix '{decision.prefix}' was committed, but some of its participant "
            f"transactions were aborted before they could be committed, so their records are LOST: "
            f"{'; '.join(_describe(p, d) for p, d in lost)}. "
            "This happens when phase 2 (or recovery) comes after the participants' transaction.timeout.ms. "
            f"{rerun}; and raise kafka.transaction.timeout.ms "
            "(up to the broker's transaction.max.timeout.ms) or restart failed queries sooner."
            + (f" Others cannot be checked any more: {unverifiable_note}." if unverifiable else "")
        )
        error.all_lost = all_lost
        raise error
    if unverifiable:
        raise KafkaEosOutputUnverifiableError(
            f"Decision {decision.epoch_id} of prefix '{decision.prefix}' was committed, but some of its participants "
            f"can no longer be committed, and the record that shows whether their output is visible is gone: "
            f"{unverifiable_note}. Their records may be visible, or lost. Check the sink for them; re-run that input "
            f"only for what is missing; then `kafka-eos reset --prefix {decision.prefix} --yes --accept-data-loss` "
            "lets the prefix go on."
        )
    if unstable:
        raise ProbesNotStableError(
            f"Decision {decision.epoch_id} of prefix '{decision.prefix}' was committed, and whether some of its "
            "participants' output is visible cannot be told yet: "
            + "; ".join(f"{_describe(p, d)}: {why}" for p, d, why in unstable)
            + ". Nothing more was written. It is told once the transaction that pins the last stable offset ends: the "
            f"prefix's own are aborted by `kafka-eos recover --prefix {decision.prefix}` (or by this run, which "
            "retries), another producer's end by its commit or its transaction timeout; then re-run.")
    # No need to wait for the markers: once PrepareCommit is logged the coordinator finishes the
    # commit, and a task re-initialising the id waits for that (CONCURRENT_TRANSACTIONS, retried).


class ProbesNotStableError(KafkaEosCommitOutcomeUnknownError):
    """A roll-forward met probes above their partition's last stable offset: retried, after the prefix's other open
    transactions are aborted (they may be what pins it)."""


def _describe(p: Participant, d: TxnDescription) -> str:
    return f"{p.transactional_id} ({p.describe_output()}): now {d.state}, producer {d.producer_id} epoch {d.producer_epoch}"


def is_open(p: Participant, d: TxnDescription) -> bool:
    """The participant's own transaction is still open."""
    return d.state == TxnState.ONGOING and (d.producer_id, d.producer_epoch) == (p.producer_id, p.producer_epoch)


def is_committed(p: Participant, d: TxnDescription) -> bool:
    """The participant's own transaction is committed (or committing)."""
    return d.state in _COMMITTED and (d.producer_id, d.producer_epoch) == (p.producer_id, p.producer_epoch)


def committable(p: Participant, d: TxnDescription) -> bool:
    """The participant's own transaction is open or committed (or committing)."""
    return is_open(p, d) or is_committed(p, d)


def _in_parallel(call: Callable[[Item], T], items: Sequence[Item]) -> list[T]:
    """``call`` on each item, :data:`_PARALLELISM` at a time; on this thread when there is one."""
    if len(items) <= 1:
        return [call(item) for item in items]
    with ThreadPoolExecutor(max_workers=_PARALLELISM) as pool:
        return list(pool.map(call, items))


def _commit(session: TransactionClient, p: Participant) -> tuple[Participant, TxnDescription] | None:
    try:
        session.commit(p.txn)
        return None
    except (TxnFencedError, TxnInvalidStateError):
        # Committed meanwhile by someone else is fine, aborted is not. Transient errors (timeouts,
        # a broker restarting) propagate instead: they say nothing about the participant.
        now = session.describe([p.transactional_id])[p.transactional_id]
        return None if committable(p, now) and now.state in _COMMITTED else (p, now)


def abort_prepared(session: TransactionClient, states: Iterable[PreparedTxnState]) -> None:
    """Abort exactly these transactions (by producer id and epoch) if they are still open."""
    def abort(state: PreparedTxnState) -> None:
        try:
            session.abort(state)
        except TxnSessionError as err:
            log.info("Not aborting %s: %s", state.transactional_id, err)

    _in_parallel(abort, list(states))


def open_transactions(session: TransactionClient, prefix: str) -> list[TxnDescription]:
    """The open transactions of ``prefix`` (task ids and the coordinator's), described."""
    ids = sorted(
        t.transactional_id for t in session.list_transactions(state_filters=[TxnState.ONGOING.value], id_prefix=f"{prefix}-")
        if belongs_to_prefix(prefix, t.transactional_id)
    )
    return [d for d in session.describe(ids).values() if d.state == TxnState.ONGOING] if ids else []


def abort_lingering(
    session: TransactionClient, prefix: str, transaction_timeout_ms: int,
    prove_ownership: Callable[[Sequence[TxnDescription]], None],
    keep: Iterable[str] = (), listed: Sequence[TxnDescription] | None = None,
) -> list[str]:
    """Abort the open transactions of ``prefix`` except ``keep`` (failed and speculative attempts,
    zombies of earlier runs), each by its exact producer id and epoch, and fence them. They are listed
    first (or given as ``listed``: :func:`open_transactions`, taken after the moment from which the sweep must
    see what is open); ``prove_ownership(batch)`` then runs before every :data:`ABORTS_PER_PROOF` of them, and not
    at all when nothing lingers: it must raise if this driver no longer owns the prefix, and announce ``batch`` to
    any driver that fences after it (a listed transaction may be a live query's next participant, prepared before
    its driver fenced). Returns the ids aborted."""
    kept = set(keep) | {coordinator_transactional_id(prefix)}
    found = open_transactions(session, prefix) if listed is None else listed
    doomed = [d for d in found if d.transactional_id not in kept]
    aborted: list[str] = []
    try:
        with ThreadPoolExecutor(max_workers=_PARALLELISM) as pool:
            for start in range(0, len(doomed), ABORTS_PER_PROOF):
                batch = doomed[start:start + ABORTS_PER_PROOF]
                prove_ownership(batch)
                aborted += [txn_id for txn_id in pool.map(lambda d: _fence(session, d, transaction_timeout_ms), batch) if txn_id]
    finally:
        if aborted:
            log.warning("Aborted lingering transactions of prefix %s: %s", prefix, ", ".join(aborted))
    if aborted:
        session.wait_settled(aborted)
    return aborted


def _fence(session: TransactionClient, d: TxnDescription, transaction_timeout_ms: int) -> str:
    """Abort ``d`` by its producer id and epoch, and fence its id; its id, or "" if it moved on since it was listed."""
    try:
        # InitProducerId with the producer id and epoch seen: aborts that transaction and bumps the
        # epoch (a zombie still writing is fenced), or fails if the id has moved on since.
        session.init_producer_id(d.transactional_id, transaction_timeout_ms, d.producer_id, d.producer_epoch)
        return d.transactional_id
    except (TxnFencedError, TxnInvalidStateError) as err:
        log.info("Not aborting %s: it moved on since it was listed (%s)", d.transactional_id, err)
        return ""
