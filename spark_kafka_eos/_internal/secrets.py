"""Which client settings are secrets, and how to show a configuration without them.

Every repr, log line and error message that shows a Kafka client configuration goes through
:func:`redact`, so SASL passwords and SSL keys never leave the process in clear text.
"""

from __future__ import annotations

from collections.abc import Mapping

REDACTED = "[redacted]"

_SECRET_KEYS = frozenset(
    {
        "sasl.password",
        "sasl.jaas.config",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.client.secret",
        "ssl.key.pem",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl_password",
        "sasl_plain_password",
        "ssl.certificate.pem",
    }
)


def is_secret(key: str) -> bool:
    """True for a setting whose value must never be shown (by name, case-insensitively)."""
    lowered = key.lower()
    bare = lowered[len("kafka."):] if lowered.startswith("kafka.") else lowered
    return bare in _SECRET_KEYS or bare.endswith(("password", "secret", ".pem", "jaas.config"))


def redact(config: Mapping[str, object]) -> dict[str, object]:
    """A copy of ``config`` with every secret value replaced by a placeholder."""
    return {key: (REDACTED if is_secret(key) else value) for key, value in config.items()}


def scrub(text: str, config: Mapping[str, object]) -> str:
    """``text`` with the value of every secret setting of ``config`` replaced by a placeholder: for messages
    written by others (librdkafka, Kafka) that may quote a value."""
    for key, value in config.items():
        if is_secret(key) and value:
            text = text.replace(str(value), REDACTED)
    return text
