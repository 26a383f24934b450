"""How to reach a Kafka cluster: its bootstrap servers and the settings that decide how clients connect and
authenticate. Built once, on the driver, by the options parsers; every client of the package (admin
clients, the decision log's and the visibility check's consumers, the transaction session) connects with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from spark_kafka_eos._internal.config.kafka_python import UnsupportedSettingError, translate
from spark_kafka_eos._internal.secrets import redact
from spark_kafka_eos.errors import KafkaEosOptionError

CONNECTION_SETTING_PREFIXES = ("security.", "ssl.", "sasl.", "socket.", "client.dns.", "broker.address.")
"""librdkafka settings (without ``kafka.``) that say how to reach the brokers, rather than how to produce or consume."""


@dataclass(frozen=True, repr=False)
class KafkaConnection:
    """Bootstrap servers and connection settings (librdkafka names, without ``kafka.``). Hashable: the
    process's caches of clients are keyed by it (see :mod:`spark_kafka_eos._internal.cluster`)."""

    bootstrap_servers: str
    settings: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, bootstrap_servers: str, kafka_settings: Mapping[str, str]) -> KafkaConnection:
        """The connection part of a write's or read's ``kafka.*`` settings (producer and consumer tuning left out)."""
        return cls(bootstrap_servers, tuple((k, v) for k, v in kafka_settings.items() if k.startswith(CONNECTION_SETTING_PREFIXES)))

    def client_config(self) -> dict[str, str]:
        """librdkafka configuration of a client that only needs to reach the cluster."""
        return {**dict(self.settings), "bootstrap.servers": self.bootstrap_servers}

    def check_session_settings(self) -> None:
        """Refuse, as an option error, connection settings the transaction session (kafka-python) cannot honour."""
        try:
            translate(self.client_config())
        except UnsupportedSettingError as err:
            raise KafkaEosOptionError(
                f"kafka.{err.setting}", f"cannot be used by the sink's transaction session: {err}.", err.fix,
            ) from None

    def __repr__(self) -> str:
        return f"KafkaConnection(bootstrap_servers={self.bootstrap_servers!r}, settings={redact(dict(self.settings))!r})"
