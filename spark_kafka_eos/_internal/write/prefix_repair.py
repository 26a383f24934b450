"""What ``kafka-eos recover`` and ``kafka-eos reset`` do to a prefix, apart from what they print.

``recover`` does what the driver's recovery and commit do: fence other drivers, roll the last decision forward, then
abort (and fence) every open transaction of the prefix. ``reset`` recovers, then appends a ``reset`` record so that
a new query (a new checkpoint) may reuse the prefix from micro-batch 0; on a prefix without a record, the reset
acknowledges a fresh start. Every record is built here; the operator tools only render what came of it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaException

from spark_kafka_eos._internal.config.writer import WriterOptions
from spark_kafka_eos._internal.decision_log.protocol import DecisionLog
from spark_kafka_eos._internal.decision_log.records import HISTORY_LIMIT, LogRecord, history_without, memory_after
from spark_kafka_eos._internal.error_text import error_text
from spark_kafka_eos._internal.txn.protocol import TransactionClient
from spark_kafka_eos._internal.txn.session import TxnDescription
from spark_kafka_eos._internal.write.coordinator import RecoveryReport, TwoPhaseCommitCoordinator
from spark_kafka_eos._internal.write.recovery import abort_lingering
from spark_kafka_eos._internal.write.transaction_timeout import resolve_transaction_timeout_ms
from spark_kafka_eos.errors import KafkaEosDecisionLogError


@dataclass(frozen=True)
class PrefixRecovery:
    """What :func:`recover_prefix` did: the coordinator's report (None when the decision log does not exist) and the
    open transactions it aborted."""

    report: RecoveryReport | None
    aborted: tuple[str, ...]

    @property
    def last_before(self) -> LogRecord | None:
        return self.report.last_before if self.report is not None else None

    @property
    def rolled_forward(self) -> bool:
        """Whether the prefix's last record was a decision, which the recovery rolled forward."""
        return self.last_before is not None and self.last_before.kind == "decision"

    @property
    def did_anything(self) -> bool:
        return self.rolled_forward or bool(self.aborted)


@dataclass(frozen=True)
class Reset:
    """What a reset came to: ``record`` appended, or refused because ``found`` is the prefix's last record now (a
    driver of the prefix fenced the reset while it ran). ``moved_back``: the consumer group offsets the reset
    moved back to where a forgotten epoch started."""

    record: LogRecord | None
    found: LogRecord | None = None
    moved_back: dict[tuple[str, int], int] | None = None


def recover_prefix(options: WriterOptions, session: TransactionClient, decision_log: DecisionLog | None,
                   accept_data_loss: bool = False) -> PrefixRecovery:
    """Roll the prefix's last decision forward and abort its open transactions; without a ``decision_log`` (its
    topic does not exist: no decision was ever taken) only abort. A participant that can no longer be committed
    is an error, unless ``accept_data_loss``: then the report names it. The recovery fences through
    ``decision_log``, which then holds the fence (for :func:`reset_after_recovery`)."""
    timeout_ms = resolve_transaction_timeout_ms(options)
    if decision_log is None:
        return PrefixRecovery(None, tuple(abort_lingering(session, options.prefix, timeout_ms, lambda _: None)))
    report = TwoPhaseCommitCoordinator(options, timeout_ms).recover(accept_data_loss, decision_log)
    return PrefixRecovery(report, tuple(report.aborted))


def reset_after_recovery(decision_log: DecisionLog, recovery: PrefixRecovery) -> Reset:
    """Append the reset that follows the record the recovery found, through the recovery's fence: a compare-and-set,
    refused when a driver of the prefix wrote since (its fence replaced the recovery's)."""
    before = recovery.last_before
    assert before is not None
    now = decision_log.fenced_last(before.prefix)  # the recovery's fence, unless its producer had to be replaced
    if now is None or now.epoch_id != before.epoch_id:
        return Reset(None, found=now)
    reset = reset_record(before, recovery.report)
    moved_back = {(t, p): o for t, p, o in reset.offsets} if reset.consumer_group else None
    append_reset(decision_log, reset, moved_back)
    return Reset(reset, moved_back=moved_back)


def acknowledge_fresh_start(decision_log: DecisionLog, prefix: str) -> Reset:
    """A prefix without a record (never used, or its log was lost): a ``reset`` record with no history tells the
    sink that starting afresh is meant, which it otherwise refuses when the prefix's coordinator has committed
    before. Refused when the prefix has a record by the time the reset's fence holds."""
    decision_log.ensure_topic()
    now = decision_log.fenced_last(prefix)  # appended through this fence: nothing lands in between unseen
    if now is not None:
        return Reset(None, found=now)
    reset = LogRecord("reset", prefix, f"reset:{_now_ms()}")
    append_reset(decision_log, reset, None)
    return Reset(reset)


def append_reset(decision_log: DecisionLog, reset: LogRecord, moved_back: dict[tuple[str, int], int] | None) -> None:
    """Append ``reset`` through the log's fenced producer: it fails if another driver fenced this one since."""
    try:
        decision_log.append(reset, moved_back)
    except (KafkaEosDecisionLogError, KafkaException) as err:
        raise KafkaEosDecisionLogError(
            f"The reset record of prefix {reset.prefix} was not appended, or its outcome is unknown ({error_text(err)}): another "
            "driver may have fenced this reset (a query still runs on the prefix), or the broker did not answer. "
            f"Fix: stop any query on the prefix; `kafka-eos inspect --prefix {reset.prefix}` shows whether its last record "
            "is the reset; if not, run reset again (a reset is safe to repeat)") from err


def reset_record(last: LogRecord, report: RecoveryReport | None) -> LogRecord:
    """The reset that follows ``last``. It keeps the prefix's history, but for an epoch whose loss it accepts:
    one with none of its records visible is forgotten (a re-run writes it whole, once); one with part of them
    visible is remembered as partly lost (a re-run would write the rest twice, so it is refused)."""
    history, memory = last.runs(), memory_after(last)
    group: str | None = None
    moved_back: tuple[tuple[str, int, int], ...] = ()
    if report is not None and report.data_loss and last.kind == "decision":
        if report.all_lost:
            history = history_without(last, last.epoch)
            if last.consumer_group and last.starts:
                # The lost decision moved its group past its input: back to where the epoch started, so that a
                # re-run from the group reads it again.
                group, moved_back = last.consumer_group, last.starts
                memory = memory_after(last, group, moved_back)
        elif last.epoch.kind == "batch":
            memory["partly_lost"] = (*last.partly_lost, last.epoch_id)[-HISTORY_LIMIT:]
    # A reset without history stands for its previous epoch (records written before histories were kept):
    # name none when the only epoch remembered was just forgotten.
    return LogRecord("reset", last.prefix, f"reset:{_now_ms()}", consumer_group=group, offsets=moved_back,
                     previous_epoch_id=last.epoch_id if history else None, history=history, **memory)  # type: ignore[arg-type]


def participant_states(session: TransactionClient, record: LogRecord | None) -> Mapping[str, TxnDescription]:
    """Current states of the participants of a decision not recorded complete yet (of no other record:
    once complete, its transactional ids are reused by later epochs)."""
    if record is None or record.kind != "decision" or not record.participants:
        return {}
    return session.describe([p.transactional_id for p in record.participants])


def _now_ms() -> int:
    return int(time.time() * 1000)
