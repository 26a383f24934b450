"""The participants' transaction timeout: the user's ``kafka.transaction.timeout.ms``, else the
broker's ``transaction.max.timeout.ms`` (read from the broker, never guessed)."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from spark_kafka_eos._internal.cluster import max_transaction_timeout_ms
from spark_kafka_eos._internal.config.writer import WriterOptions
from spark_kafka_eos.errors import KafkaEosAuthorizationError, KafkaEosOptionError


def resolve_transaction_timeout_ms(options: WriterOptions) -> int:
    """The timeout every participant transaction of this write uses."""
    wanted = options.transaction_timeout_ms
    try:
        broker_max = max_transaction_timeout_ms(options.connection)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.CLUSTER_AUTHORIZATION_FAILED:
            raise
        if wanted is not None:
            return wanted  # unchecked here; the broker refuses one above its maximum at InitProducerId
        raise KafkaEosAuthorizationError(
            "The sink reads the brokers' transaction.max.timeout.ms to use it as the transaction timeout, and the "
            f"principal may not (DescribeConfigs on the Cluster was refused by {options.connection.bootstrap_servers}). "
            "Set kafka.transaction.timeout.ms (at most the brokers' transaction.max.timeout.ms), or grant it: "
            "kafka-acls --add --allow-principal User:<principal> --operation DescribeConfigs --cluster"
        ) from None
    if wanted is None:
        return broker_max
    if wanted > broker_max:
        raise KafkaEosOptionError(
            "kafka.transaction.timeout.ms",
            f"is {wanted}, above the broker's transaction.max.timeout.ms ({broker_max}), which the broker would refuse.",
            f"use at most {broker_max}, or raise transaction.max.timeout.ms on the brokers.",
        )
    return wanted
