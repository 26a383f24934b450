"""The participants' transaction timeout: the user's ``kafka.transaction.timeout.ms``, else the
broker's ``transaction.max.timeout.ms`` (read from the broker, never guessed)."""

from __future__ import annotations

from spark_kafka_eos.cluster import max_transaction_timeout_ms
from spark_kafka_eos.errors import KafkaEosOptionError
from spark_kafka_eos.write.writer_options import WriterOptions


def resolve_transaction_timeout_ms(options: WriterOptions) -> int:
    """The timeout every participant transaction of this write uses."""
    broker_max = max_transaction_timeout_ms(options.connection)
    wanted = options.transaction_timeout_ms
    if wanted is None:
        return broker_max
    if wanted > broker_max:
        raise KafkaEosOptionError(
            "kafka.transaction.timeout.ms",
            f"is {wanted}, above the broker's transaction.max.timeout.ms ({broker_max}), which the broker would refuse.",
            f"use at most {broker_max}, or raise transaction.max.timeout.ms on the brokers.",
        )
    return wanted
