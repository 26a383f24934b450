"""The errors users of ``kafka_eos`` see. Each message names the option, topic-partition or
address involved and says how to fix it."""

from __future__ import annotations

from typing import TypeVar

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


class KafkaEosCommitError(KafkaEosError):
    """The epoch could not be committed as asked. The message says which: aborted (nothing of it is
    visible), or committed with phase 2 unfinished (do not re-run; recovery finishes it)."""


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
