"""What every librdkafka client of the package gets on top of its settings.

* Logs: librdkafka's lines go to Python logging, not to stderr. Levels map to Python's (3 error ->
  ERROR, 4 warning -> WARNING, 6 info -> INFO, 7 debug -> DEBUG), under the logger
  ``spark_kafka_eos.librdkafka``; lines come out when the client is polled, so an idle client (one
  kept for the next micro-batch while a broker restarts) prints nothing.
* Connections: ``reconnect.backoff.ms`` starts at 10 ms (librdkafka: 100 ms, jittered), unless set. A
  new client connects to the bootstrap server, then again to the broker its metadata names; that second
  connection waited for the backoff, ~50 ms of every short-lived producer and reader. Repeated failures
  still back off exponentially, up to ``reconnect.backoff.max.ms``: 1 s unless set, as in Kafka's Java
  clients (librdkafka: 10 s, so that after a network blip of a few seconds its connections came back up to
  10 s after the network did).
* AWS MSK IAM: ``sasl.mechanism=AWS_MSK_IAM`` (kafka-python's name) becomes librdkafka's OAUTHBEARER
  with a token callback that signs with the AWS credentials and region of the environment
  (``aws-msk-iam-sasl-signer-python``, the ``msk`` extra).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from spark_kafka_eos._internal.librdkafka_logs import LIBRDKAFKA_LOGGER
from spark_kafka_eos.errors import KafkaEosOptionError

MSK_IAM = "AWS_MSK_IAM"
RECONNECT_BACKOFF_MS = 10
RECONNECT_BACKOFF_MAX_MS = 1000
_REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")

# Java-client settings with no librdkafka meaning, and what to use instead.
JAVA_ONLY_SETTINGS: Mapping[str, str] = {
    "sasl.jaas.config": "set kafka.sasl.mechanism, kafka.sasl.username and kafka.sasl.password "
    "(or kafka.sasl.oauthbearer.* for OAUTHBEARER) instead of a JAAS line",
    "ssl.truststore.location": "give the CA certificates as PEM with kafka.ssl.ca.location",
    "ssl.truststore.password": "give the CA certificates as PEM with kafka.ssl.ca.location (no password)",
    "ssl.truststore.type": "give the CA certificates as PEM with kafka.ssl.ca.location",
    "ssl.keystore.type": "use a PKCS#12 file in kafka.ssl.keystore.location, or PEM files in "
    "kafka.ssl.certificate.location and kafka.ssl.key.location",
    "sasl.login.callback.handler.class": "use kafka.sasl.oauthbearer.method=oidc with kafka.sasl.oauthbearer.* settings",
    "sasl.client.callback.handler.class": "use kafka.sasl.oauthbearer.method=oidc with kafka.sasl.oauthbearer.* settings",
    "interceptor.classes": "remove it: librdkafka has no Java interceptors",
    "metric.reporters": "remove it; use kafka.statistics.interval.ms for librdkafka statistics",
    "security.providers": "remove it: librdkafka uses OpenSSL",
    "ssl.engine.factory.class": "remove it: librdkafka uses OpenSSL",
    "default.api.timeout.ms": "use kafka.socket.timeout.ms (requests) or kafkaConsumer.pollTimeoutMs (reads)",
    "max.poll.records": "use the source option maxRecordsPerBatch",
}


def for_librdkafka(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the logger, short reconnect backoffs (unless set) and, for AWS MSK IAM, the OAUTHBEARER token callback."""
    out = {"reconnect.backoff.ms": RECONNECT_BACKOFF_MS, "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS, **config,
           "logger": LIBRDKAFKA_LOGGER}
    if str(out.get("sasl.mechanism", out.get("sasl.mechanisms", ""))).strip().upper() == MSK_IAM:
        out.pop("sasl.mechanisms", None)
        out["sasl.mechanism"] = "OAUTHBEARER"
        out["oauth_cb"] = msk_iam_token_callback()
    return out


def aws_region() -> str:
    """The AWS region of the environment, as the AWS SDKs find it first."""
    for variable in _REGION_VARIABLES:
        if os.environ.get(variable, "").strip():
            return os.environ[variable].strip()
    raise KafkaEosOptionError(
        "kafka.sasl.mechanism", f"is {MSK_IAM}, but no AWS region is set.",
        f"set {' or '.join(_REGION_VARIABLES)} in the environment of the driver and the executors.",
    )


def msk_iam_token_callback() -> Callable[[str], tuple[str, float]]:
    """librdkafka's ``oauth_cb``: an MSK IAM token and its expiry (seconds since the epoch)."""
    try:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
    except ImportError:
        raise KafkaEosOptionError(
            "kafka.sasl.mechanism", f"is {MSK_IAM}, but aws-msk-iam-sasl-signer-python is not installed.",
            "pip install 'spark-kafka-eos[msk]' on the driver and the executors.",
        ) from None
    region = aws_region()

    def token(_oauthbearer_config: str) -> tuple[str, float]:
        signed, expiry_ms = MSKAuthTokenProvider.generate_auth_token(region)
        return signed, expiry_ms / 1000.0

    return token
