"""Which brokers the sink can run on: Kafka 3.0 and later, told by the APIs they advertise.

Recovery and the sweep of a prefix's open transactions need ListTransactions and DescribeTransactions
(KIP-664, Kafka 3.0). Without them a crashed epoch could not be settled, so the sink refuses such a
cluster before anything is written. Reads need only read_committed (any Kafka since 0.11)."""

from __future__ import annotations

from collections.abc import Mapping

from spark_kafka_eos._internal.cluster import cached_session
from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos.errors import KafkaEosUnsupportedBrokerError

TRANSACTION_ADMIN_APIS = ("ListTransactions", "DescribeTransactions")
_SUPPORTED: set[KafkaConnection] = set()


def missing_apis(advertised: Mapping[str, tuple[int, int]]) -> list[str]:
    """The transaction admin APIs a broker advertising ``advertised`` (API name → versions) lacks."""
    return [api for api in TRANSACTION_ADMIN_APIS if api not in advertised]


def require_transaction_admin_apis(connection: KafkaConnection, bootstrap_servers: str) -> None:
    """Raise :class:`KafkaEosUnsupportedBrokerError` unless the cluster's brokers have the transaction
    admin APIs; asked once per cluster and process."""
    if connection in _SUPPORTED:
        return
    missing = missing_apis(cached_session(connection).api_versions())
    if missing:
        raise KafkaEosUnsupportedBrokerError(
            f"The Kafka cluster at {bootstrap_servers} does not support {' and '.join(missing)} (Kafka 3.0, KIP-664): "
            "kafka_eos needs them to find and settle the transactions a crashed write left open, so it writes "
            "nothing to a cluster without them. Fix: upgrade the brokers to Kafka 3.0 or later (reads work on any "
            "Kafka since 0.11)."
        )
    _SUPPORTED.add(connection)
