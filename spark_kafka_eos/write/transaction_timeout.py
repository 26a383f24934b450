"""The participants' transaction timeout: the user's ``kafka.transaction.timeout.ms``, else the
broker's ``transaction.max.timeout.ms`` (read from the broker, never guessed)."""

from __future__ import annotations

from confluent_kafka.admin import ConfigResource

from spark_kafka_eos.errors import KafkaEosOptionError
from spark_kafka_eos.write.writer_options import WriterOptions



# Per bootstrap servers, for reused Python workers: a broker setting that changes only on restart.
_BROKER_MAX: dict[str, int] = {}


def broker_max_transaction_timeout_ms(options: WriterOptions) -> int:
    """``transaction.max.timeout.ms`` of a broker of the cluster."""
    if options.bootstrap_servers in _BROKER_MAX:
        return _BROKER_MAX[options.bootstrap_servers]
    admin = options.admin_client()
    broker_id = next(iter(admin.list_topics(timeout=30).brokers))
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    configs = admin.describe_configs([resource], request_timeout=30)[resource].result(30)
    _BROKER_MAX[options.bootstrap_servers] = int(configs["transaction.max.timeout.ms"].value)
    return _BROKER_MAX[options.bootstrap_servers]


def resolve_transaction_timeout_ms(options: WriterOptions) -> int:
    """The timeout every participant transaction of this write uses."""
    broker_max = broker_max_transaction_timeout_ms(options)
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
