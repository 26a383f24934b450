"""Authentication failures, told apart from an unreachable cluster.

A client whose credentials the brokers refuse looks, from its blocking calls, like a cluster that does not
answer: librdkafka reports ``Broker transport failure`` or a timeout, and tells the real cause only to the
client's ``error_cb``, which runs when the client is polled. :class:`AuthenticationWatch` is that callback;
:meth:`AuthenticationWatch.check` polls the client and raises :class:`KafkaEosAuthenticationError` if the
brokers refused it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

from spark_kafka_eos._internal.secrets import scrub
from spark_kafka_eos.errors import KafkaEosAuthenticationError

# What librdkafka's reason says when a TLS handshake failed (it reports some of them as transport failures).
_TLS_REFUSALS = ("SSL handshake failed", "ssl/tls alert", "certificate verify failed")


class AuthenticationWatch:
    """librdkafka's ``error_cb`` for one client: remembers the first authentication failure it reports, a refused
    TLS handshake (a client certificate the brokers do not accept, a broker certificate the client does not) too."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = dict(config)
        self.failure: str | None = None
        self.tls = False

    def __call__(self, error: KafkaError) -> None:
        if self.failure is not None:
            return
        reason = error.str()
        tls = error.code() == KafkaError._SSL or (
            error.code() == KafkaError._TRANSPORT and any(text in reason for text in _TLS_REFUSALS))
        if error.code() == KafkaError._AUTHENTICATION or tls:
            self.failure, self.tls = scrub(reason, self._config), tls

    def check(self, client: Any) -> None:
        """Serve ``client``'s queued events, then raise if the brokers refused its credentials."""
        client.poll(0)
        if self.failure is not None:
            raise authentication_error(self._config, self.failure, self.tls)


_METADATA_SLICE_S = 2.0


def list_topics(admin: AdminClient, watch: AuthenticationWatch, timeout_s: float, topic: str | None = None) -> ClusterMetadata:
    """``admin.list_topics`` within ``timeout_s``, asked in slices of 2 s so that refused credentials fail
    in seconds with :class:`KafkaEosAuthenticationError` instead of a transport failure at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return admin.list_topics(topic, timeout=max(min(_METADATA_SLICE_S, deadline - time.monotonic()), 0.1))
        except KafkaException as exc:
            if exc.args[0].code() not in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT) or time.monotonic() >= deadline:
                raise
            watch.check(admin)


def authentication_error(config: Mapping[str, Any], cause: str, tls: bool = False) -> KafkaEosAuthenticationError:
    """The error for refused credentials: who was refused, by which brokers, and which options to check."""
    if tls:
        return KafkaEosAuthenticationError(
            f"Kafka at {config.get('bootstrap.servers')} and the client could not agree on TLS: the handshake failed "
            f"({cause}). Check kafka.ssl.ca.location or kafka.ssl.ca.pem (the brokers' CA), and the client's certificate "
            "(kafka.ssl.keystore.location, kafka.ssl.certificate.*, kafka.ssl.key.*): a broker that requires one "
            "(ssl.client.auth=required) accepts only a certificate signed by a CA it trusts."
        )
    user = config.get("sasl.username")
    mechanism = config.get("sasl.mechanism", config.get("sasl.mechanisms", "GSSAPI"))
    who = f"user '{user}' ({mechanism})" if user else f"the client ({mechanism})"
    return KafkaEosAuthenticationError(
        f"Kafka at {config.get('bootstrap.servers')} refused the credentials of {who}: authentication failed "
        f"({cause}). Check kafka.sasl.username, kafka.sasl.password, kafka.sasl.mechanism and kafka.security.protocol."
    )
