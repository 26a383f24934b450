"""How a commit that does not end in success ends: the one table from what happened to the outcome the sink reports.

Each row is a :class:`Ending`: when it happens (before the decision, the decision's write, after the decision), what
happened, and the :class:`~spark_kafka_eos.errors.CommitOutcome` it ends in, with what became of the participants.
The coordinator raises through :meth:`Ending.error`, so the outcome of every failure is read here, not chosen at
the place it is raised. The operations page's table "How a commit ends" is this table; a test checks that both agree.
"""

from __future__ import annotations

from enum import Enum

from spark_kafka_eos.errors import CommitOutcome, KafkaEosCommitError

BEFORE = "before the decision"
DECISION = "writing the decision"
AFTER = "after the decision"

# Each outcome's error class: the subclass that states it (errors.py has one for each).
_ERRORS: dict[CommitOutcome, type[KafkaEosCommitError]] = {error.outcome: error for error in KafkaEosCommitError.__subclasses__()}


class Ending(Enum):
    """A way a commit ends other than in success: (when, what happened, outcome, the participants)."""

    RUN_REFUSED = (BEFORE, "the run is not the one the decision log remembers (another owner, a replay over other "
                   "input, an unknown query, a consumer group that stands elsewhere or lost its log)",
                   CommitOutcome.REFUSED, "aborted, where any was open")
    STRANGER_TASKS = (BEFORE, "tasks of another epoch were handed to the commit (a bug)", CommitOutcome.ABORTED,
                      "not decided: the prefix's next sweep aborts them")
    SWEPT = (BEFORE, "a sweep of the prefix listed a participant as lingering while it was open",
             CommitOutcome.ABORTED, "aborted")
    GROUP_NOT_SETTLED = (BEFORE, "the consumer group points past a decision that could not be rolled forward",
                         CommitOutcome.ABORTED, "none open yet")
    TOO_LATE = (BEFORE, "a participant could time out before the decision commits", CommitOutcome.ABORTED, "aborted")
    DECISION_REFUSED = (DECISION, "the decision's transaction failed before its commit was sent",
                        CommitOutcome.ABORTED, "aborted")
    DECISION_NOT_IN_LOG = (DECISION, "its commit failed, and the log, read back after a fence, does not have it",
                           CommitOutcome.ABORTED, "aborted")
    DECISION_UNREADABLE = (DECISION, "its commit failed, and the log cannot be read back",
                           CommitOutcome.UNKNOWN, "left open: the next recovery reads the log again")
    DECIDED_AND_FOLLOWED = (DECISION, "its commit failed, but the log has it, and a later record written by another "
                            "driver", CommitOutcome.COMMITTED, "committed by that driver if it decided these, else aborted")
    PHASE2_UNFINISHED = (AFTER, "phase 2 did not finish", CommitOutcome.COMMITTED,
                         "committed by the writer's next start or `kafka-eos recover`")
    DECIDED_BEFORE_ABORT = (AFTER, "a batch job was aborted by Spark after its decision", CommitOutcome.COMMITTED,
                            "committed by the abort")

    def __init__(self, moment: str, happened: str, outcome: CommitOutcome, participants: str) -> None:
        self.moment = moment
        self.happened = happened
        self.outcome = outcome
        self.participants = participants

    def error(self, message: str) -> KafkaEosCommitError:
        """The error this ending raises, of its outcome's class."""
        return _ERRORS[self.outcome](message)
