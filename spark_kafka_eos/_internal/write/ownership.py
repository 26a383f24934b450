"""Who may commit an epoch on a prefix, given the prefix's last decision-log record and its history. Pure logic.

A prefix is owned by the run that wrote its last record. A stream's run is its query id, stable across
restarts of one checkpoint; a batch job's run is its write id. The rules:

- a replay (the same run and batch, or the same write id) is recognised, never decided twice;
- the owning stream moves forward; a micro-batch older than the last one decided is refused;
- another streaming query never takes over silently: it could come back and replay a batch, and
  nothing could tell that replay apart. It is refused until ``cli reset`` hands the prefix over;
- a finished batch job owns nothing: batch jobs and streams may follow it;
- after a reset, anyone may proceed, except a stream the prefix remembers replaying what it had
  already decided;
- a batch job's write id the prefix remembers (in the last record's history) is a replay, however many
  jobs and resets came since; one whose output a reset accepted as partly lost is refused (neither
  skipping it nor writing it whole is exact).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord


class Verdict(Enum):
    PROCEED = "proceed"
    REPLAY = "replay"
    REFUSE = "refuse"


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    reason: str = ""
    fix: str = ""
    """For a refusal whose fix is not the usual one (a prefix of its own, or a reset)."""


def judge(last: LogRecord | None, epoch: EpochId) -> Judgement:
    """May ``epoch`` be decided on a prefix whose last record is ``last`` (with the history it carries)?"""
    if last is None:
        return Judgement(Verdict.PROCEED)
    remembered = last.last_decided(epoch)
    if epoch.kind == "batch" and str(epoch) in last.partly_lost:
        return Judgement(Verdict.REFUSE, f"it decided {epoch.describe()} before, and a reset accepted the loss of part of its "
                                         "output (`kafka-eos reset --accept-data-loss` printed which partitions): the rest is "
                                         "visible, so a re-run would write that twice, and skipping it would leave the loss",
                         "re-run only the lost partitions' input, under a new writeId")
    if epoch.kind == "batch" and remembered is not None:
        return Judgement(Verdict.REPLAY)  # however many jobs or resets came since
    if last.kind == "reset":
        return _not_behind(remembered, epoch, "it was reset after")
    previous = last.epoch
    if previous == epoch:
        return Judgement(Verdict.REPLAY)
    if previous.kind == "batch":
        return _not_behind(remembered, epoch, "it decided")
    if epoch.same_run(previous):
        assert epoch.batch_id is not None and previous.batch_id is not None
        if epoch.batch_id > previous.batch_id:
            return Judgement(Verdict.PROCEED)
        return Judgement(Verdict.REFUSE, f"it already decided micro-batch {previous.batch_id} of this query, which is now at "
                                         f"micro-batch {epoch.batch_id}: the checkpoint was rolled back or copied")
    return Judgement(Verdict.REFUSE, f"it is owned by another streaming query: its last record is {last.kind} of "
                                     f"{previous.describe()}, and that query could still restart and replay it")


def already_decided(last: LogRecord | None, epoch: EpochId) -> bool:
    """True if the prefix decided ``epoch`` itself or a later micro-batch of its run: ``epoch`` can no
    longer be decided (what a straggling task of it asks)."""
    remembered = None if last is None else last.last_decided(epoch)
    if remembered is None:
        return False
    return epoch.kind == "batch" or (remembered.batch_id or 0) >= (epoch.batch_id or 0)


def _not_behind(remembered: EpochId | None, epoch: EpochId, why: str) -> Judgement:
    """A stream the prefix remembers (from before a reset or a batch job) may only go on past what it decided."""
    if (remembered is not None and epoch.kind == "stream" and remembered.batch_id is not None
            and epoch.batch_id is not None and epoch.batch_id <= remembered.batch_id):
        return Judgement(Verdict.REFUSE, f"{why} {remembered.describe()}, and this is that query again at "
                                         f"micro-batch {epoch.batch_id}: a replay that can no longer be recognised")
    return Judgement(Verdict.PROCEED)
