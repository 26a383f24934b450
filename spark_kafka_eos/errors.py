"""The errors users of ``kafka_eos`` see. Each message names the option, topic-partition or
address involved and says how to fix it."""

from __future__ import annotations


class KafkaEosError(Exception):
    """Base class of every error raised by spark-kafka-eos."""


class KafkaEosOptionError(KafkaEosError, ValueError):
    """An option is missing, malformed, contradicts another, or is not supported here."""

    def __init__(self, option: str, problem: str, fix: str) -> None:
        self.option = option
        super().__init__(f"Option '{option}': {problem} Fix: {fix}")


class KafkaEosDataLossError(KafkaEosError):
    """Records the query needed are gone (retention, deleted topic or partition).

    Raised only when ``failOnDataLoss`` is true (the default)."""


class KafkaEosUnavailableError(KafkaEosError, TimeoutError):
    """Kafka did not answer in time."""


class KafkaEosReadError(KafkaEosError):
    """Reading a planned offset range failed."""
