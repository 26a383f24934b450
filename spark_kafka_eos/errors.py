"""The errors users of ``kafka_eos`` see. Each message names the option, topic-partition or
address involved and says how to fix it."""

from __future__ import annotations

import re
from enum import Enum
from typing import ClassVar, TypeVar

__all__ = [
    "CommitOutcome",
    "KafkaEosAuthenticationError",
    "KafkaEosAuthorizationError",
    "KafkaEosCommitError",
    "KafkaEosCommitOutcomeUnknownError",
    "KafkaEosCommittedDataLostError",
    "KafkaEosDataLossError",
    "KafkaEosDecisionLogError",
    "KafkaEosEpochAbortedError",
    "KafkaEosEpochCommittedError",
    "KafkaEosError",
    "KafkaEosOptionError",
    "KafkaEosOutputUnverifiableError",
    "KafkaEosReadError",
    "KafkaEosRunRefusedError",
    "KafkaEosSchemaError",
    "KafkaEosUnavailableError",
    "KafkaEosUnsupportedBrokerError",
    "KafkaEosWriteError",
    "commit_outcome",
]

_E = TypeVar("_E", bound="KafkaEosError")


class KafkaEosError(Exception):
    """Base class of every error raised by spark-kafka-eos."""

    code: int | None = None
    """The Kafka (librdkafka) error code behind it, where there is one: the values of
    ``confluent_kafka.KafkaError`` (e.g. ``KafkaError.MSG_SIZE_TOO_LARGE``)."""

    def with_code(self: _E, code: int) -> _E:
        """This error, carrying the Kafka error code behind it."""
        self.code = code
        return self


class KafkaEosOptionError(KafkaEosError, ValueError):
    """An option is missing, malformed, contradicts another, or is not supported here."""

    def __init__(self, option: str, problem: str, fix: str) -> None:
        self.option = option
        super().__init__(f"Option '{option}': {problem} Fix: {fix}")


class KafkaEosDataLossError(KafkaEosError):
    """Records the query needed are gone (retention, deleted topic or partition).

    Raised only when ``failOnDataLoss`` is true (the default)."""


class KafkaEosAuthorizationError(KafkaEosError, PermissionError):
    """The client's principal lacks an ACL the read needs; the message names the ACL to grant."""


class KafkaEosAuthenticationError(KafkaEosError, PermissionError):
    """The brokers refused the client's credentials (SASL authentication failed)."""


class KafkaEosUnavailableError(KafkaEosError, TimeoutError):
    """Kafka did not answer in time."""


class KafkaEosUnsupportedBrokerError(KafkaEosError):
    """The Kafka cluster lacks an API the sink needs (brokers before Kafka 3.0)."""


class KafkaEosReadError(KafkaEosError):
    """Reading a planned offset range failed."""


class KafkaEosSchemaError(KafkaEosError, ValueError):
    """The DataFrame to write lacks a column the sink needs, or has one of the wrong type."""

    def __init__(self, column: str, problem: str, fix: str) -> None:
        self.column = column
        super().__init__(f"Column '{column}': {problem} Fix: {fix}")


class KafkaEosWriteError(KafkaEosError):
    """A task could not write its records; its transaction was aborted, so none of them is visible."""

    def __init__(self, transactional_id: str, problem: str, fix: str, code: int | None = None) -> None:
        self.transactional_id = transactional_id
        self.code = code
        super().__init__(
            f"Writing to Kafka failed (transactional id {transactional_id!r}): {problem} None of the task's records "
            f"becomes visible (its transaction, if any, is aborted). Fix: {fix}."
        )


class KafkaEosDecisionLogError(KafkaEosError):
    """The decision log cannot be read or written."""


class CommitOutcome(str, Enum):
    """What became of an epoch whose commit raised a :class:`KafkaEosCommitError`."""

    ABORTED = "aborted"
    """Nothing of it is visible, and a retry as it is may succeed (a broker or timeout problem)."""
    REFUSED = "refused"
    """Nothing of it is visible, and a retry as it is is refused again: the message's Fix needs a person."""
    COMMITTED = "committed"
    """It is decided: all of it is visible, or becomes visible at the next recovery. Never re-run it."""
    UNKNOWN = "unknown"
    """Nobody can tell yet: run ``kafka-eos recover`` (or start the writer again) before anything else."""

    @property
    def rerun_safe(self) -> bool:
        """True when running the epoch's input again cannot write any of it twice."""
        return self in (CommitOutcome.ABORTED, CommitOutcome.REFUSED)

    def __str__(self) -> str:
        return self.value


_OUTCOME_TAG = "[kafka-eos outcome: {outcome}; re-run safe: {safe}]"
_OUTCOME_PATTERN = re.compile(r"\[kafka-eos outcome: (" + "|".join(o.value for o in CommitOutcome) + r"); re-run safe: (?:yes|no)\]")


class KafkaEosCommitError(KafkaEosError):
    """The epoch could not be committed as asked; :attr:`outcome` says what became of it. Raised as one of the
    four subclasses. The message ends with a tag (``[kafka-eos outcome: aborted; re-run safe: yes]``) that
    survives Spark's wrapping of Python errors: :func:`commit_outcome` reads it back."""

    outcome: ClassVar[CommitOutcome]

    def __init__(self, message: str) -> None:
        tag = _OUTCOME_TAG.format(outcome=self.outcome.value, safe="yes" if self.outcome.rerun_safe else "no")
        super().__init__(f"{message} {tag}")

    @property
    def rerun_safe(self) -> bool:
        """True when running the epoch's input again cannot write any of it twice."""
        return self.outcome.rerun_safe


class KafkaEosEpochAbortedError(KafkaEosCommitError):
    """The epoch was aborted: nothing of it is visible; a retry may succeed."""

    outcome = CommitOutcome.ABORTED


class KafkaEosRunRefusedError(KafkaEosCommitError):
    """The run was refused (another run owns the prefix, the checkpoint or the consumer group does not match
    what the log remembers): nothing of the epoch is visible; the message's Fix says what a person must do."""

    outcome = CommitOutcome.REFUSED


class KafkaEosEpochCommittedError(KafkaEosCommitError):
    """The epoch IS committed though something failed after its decision: do not re-run it; the next start of
    a writer with the prefix (or ``kafka-eos recover``) makes whatever is not yet visible visible."""

    outcome = CommitOutcome.COMMITTED


class KafkaEosCommitOutcomeUnknownError(KafkaEosCommitError):
    """Whether the epoch was decided cannot be told now (the decision write failed and the log could not be
    read back): run ``kafka-eos recover`` before re-running anything."""

    outcome = CommitOutcome.UNKNOWN


def commit_outcome(error: BaseException | str) -> CommitOutcome | None:
    """The outcome a :class:`KafkaEosCommitError` states, also when Spark wrapped it (a
    ``StreamingQueryException`` or ``PythonException`` whose message embeds it); None for any other error."""
    if isinstance(error, KafkaEosCommitError):
        return error.outcome
    found = _OUTCOME_PATTERN.findall(str(error))
    return CommitOutcome(found[-1]) if found else None


class KafkaEosCommittedDataLostError(KafkaEosError):
    """A participant of a committed decision was aborted (usually: its transaction timed out before
    phase 2 reached it). Its records are lost; this is never silent."""

    all_lost: bool = False
    """Every participant of the decision is lost: none of the epoch's records is visible, so it can be
    re-run whole once a ``reset --accept-data-loss`` has forgotten it."""


class KafkaEosOutputUnverifiableError(KafkaEosCommittedDataLostError):
    """A participant of a committed decision can no longer be committed, and the record that would tell
    whether its output is visible was removed since (retention, compaction). It stops everything a loss
    stops: nobody can tell whether re-running its input would duplicate or restore it."""
