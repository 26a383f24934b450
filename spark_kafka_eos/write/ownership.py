"""Who may commit an epoch on a prefix, given the prefix's last decision-log record. Pure logic.

A prefix is owned by the run that wrote its last record. A stream's run is its query id, stable across
restarts of one checkpoint; a batch job's run is its write id. The rules:

- a replay (the same run and batch, or the same write id) is recognised, never decided twice;
- the owning stream moves forward; a micro-batch older than the last one decided is refused;
- another streaming query never takes over silently: it could come back and replay a batch, and
  nothing could tell that replay apart. It is refused until ``cli reset`` hands the prefix over;
- a finished batch job owns nothing: batch jobs and streams may follow it;
- after a reset, anyone may proceed, except the run that owned the prefix before the reset replaying
  what it had already decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional

from spark_kafka_eos.write.log_record import EpochId, LogRecord


class Verdict(Enum):
    PROCEED = "proceed"
    REPLAY = "replay"
    REFUSE = "refuse"


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    reason: str = ""


def judge(last: Optional[LogRecord], epoch: EpochId) -> Judgement:
    """May ``epoch`` be decided on a prefix whose last record is ``last``?"""
    if last is None:
        return Judgement(Verdict.PROCEED)
    previous = last.epoch
    if last.kind == "reset":
        return _after_reset(last.previous_epoch, epoch)
    if previous == epoch:
        return Judgement(Verdict.REPLAY)
    if previous.kind == "batch":
        return Judgement(Verdict.PROCEED)
    if epoch.same_run(previous):
        assert epoch.batch_id is not None and previous.batch_id is not None
        if epoch.batch_id > previous.batch_id:
            return Judgement(Verdict.PROCEED)
        return Judgement(Verdict.REFUSE, f"it already decided micro-batch {previous.batch_id} of this query, which is now at "
                                         f"micro-batch {epoch.batch_id}: the checkpoint was rolled back or copied")
    return Judgement(Verdict.REFUSE, f"it is owned by another streaming query: its last record is {last.kind} of "
                                     f"{previous.describe()}, and that query could still restart and replay it")


def already_decided(last: Optional[LogRecord], epoch: EpochId) -> bool:
    """True if the prefix's last record is ``epoch`` itself or a later micro-batch of its run: ``epoch``
    can no longer be decided (what a straggling task of it asks)."""
    if last is None or last.kind == "reset":
        return False
    verdict = judge(last, epoch).verdict
    return verdict == Verdict.REPLAY or (verdict == Verdict.REFUSE and epoch.same_run(last.epoch))


def _after_reset(before: Optional[EpochId], epoch: EpochId) -> Judgement:
    if (before is not None and before.kind == "stream" and epoch.same_run(before)
            and before.batch_id is not None and epoch.batch_id is not None and epoch.batch_id <= before.batch_id):
        return Judgement(Verdict.REFUSE, f"it was reset after {before.describe()}, and this is that query again at "
                                         f"micro-batch {epoch.batch_id}: a replay that can no longer be recognised")
    return Judgement(Verdict.PROCEED)
