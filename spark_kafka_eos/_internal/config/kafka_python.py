"""librdkafka-style client settings -> keyword arguments of kafka-python's connection manager.

Users configure the connector with librdkafka names (``kafka.security.protocol``, ``kafka.sasl.username``...),
because the data path runs on confluent-kafka. The transaction session speaks to the coordinators with
kafka-python, so the settings that decide *how to reach and authenticate to* the brokers are translated here.
Everything else (producer and consumer tuning) does not matter for coordinator RPCs and is ignored. A
security-relevant setting that kafka-python cannot honour is an error: silently connecting with weaker
security, or not at all, is worse than refusing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator, Mapping

from spark_kafka_eos._internal.config.librdkafka import JAVA_ONLY_SETTINGS
from spark_kafka_eos._internal.config.setting_error import UnsupportedSettingError
from spark_kafka_eos._internal.config.tls import TLS_SETTINGS, tls_context
from spark_kafka_eos._internal.secrets import redact

_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
_SASL_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER", "AWS_MSK_IAM"})
_DNS_LOOKUPS = frozenset({"use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"})

# OAUTHBEARER with OIDC client credentials: these settings become one token provider (see _oauth_provider).
_OIDC_SETTINGS = frozenset({
    "sasl.oauthbearer.method", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope",
})

# GSSAPI: the keytab and the principal become one login of the transaction session's own (see _kerberos_login).
_KERBEROS_LOGIN = frozenset({"sasl.kerberos.keytab", "sasl.kerberos.principal"})

# Settings whose names look like security settings but that only librdkafka's data path uses and
# that cannot weaken or change how the coordinator connection is authenticated.
_IGNORED_SECURITY = frozenset({"sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin"})

# A security setting (by prefix) that is neither translated nor ignored is refused.
_SECURITY_PREFIXES = ("ssl.", "sasl.", "security.", "ssl_", "sasl_", "enable.ssl.", "https.")

# Why some security settings are refused, so the error can say what to use instead.
_UNSUPPORTED_HINTS = {
    **{key: f"this is a Java setting; {hint}" for key, hint in JAVA_ONLY_SETTINGS.items() if key.startswith(_SECURITY_PREFIXES)},
}


def _text(value: object) -> str:
    return str(value).strip()


def _integer(key: str) -> Callable[[object], int]:
    def parse(value: object) -> int:
        try:
            return int(_text(value))
        except ValueError:
            raise ValueError(f"{key} must be an integer number of milliseconds, got {_text(value)!r}") from None

    return parse


def _one_of(key: str, allowed: frozenset[str], upper: bool = True) -> Callable[[object], str]:
    def parse(value: object) -> str:
        text = _text(value).upper() if upper else _text(value).lower()
        if text not in allowed:
            raise ValueError(f"{key}={_text(value)!r} is not supported here; use one of {sorted(allowed)}")
        return text

    return parse


# librdkafka name -> (kafka-python keyword, parser). The TLS settings become one context (see tls.py).
_TRANSLATIONS: dict[str, tuple[str, Callable[[object], object]]] = {
    "bootstrap.servers": ("bootstrap_servers", _text),
    "metadata.broker.list": ("bootstrap_servers", _text),
    "client.id": ("client_id", _text),
    "security.protocol": ("security_protocol", _one_of("security.protocol", _SECURITY_PROTOCOLS)),
    "sasl.mechanism": ("sasl_mechanism", _one_of("sasl.mechanism", _SASL_MECHANISMS)),
    "sasl.mechanisms": ("sasl_mechanism", _one_of("sasl.mechanisms", _SASL_MECHANISMS)),
    "sasl.username": ("sasl_plain_username", _text),
    "sasl.password": ("sasl_plain_password", _text),
    "sasl.kerberos.service.name": ("sasl_kerberos_service_name", _text),
    "socket.timeout.ms": ("request_timeout_ms", _integer("socket.timeout.ms")),
    "socket.connection.setup.timeout.ms": (
        "socket_connection_setup_timeout_ms",
        _integer("socket.connection.setup.timeout.ms"),
    ),
    "reconnect.backoff.ms": ("reconnect_backoff_ms", _integer("reconnect.backoff.ms")),
    "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", _integer("reconnect.backoff.max.ms")),
    "connections.max.idle.ms": ("connections_max_idle_ms", _integer("connections.max.idle.ms")),
    "metadata.max.age.ms": ("metadata_max_age_ms", _integer("metadata.max.age.ms")),
    "client.dns.lookup": ("client_dns_lookup", _one_of("client.dns.lookup", _DNS_LOOKUPS, upper=False)),
    "receive.message.max.bytes": ("receive_message_max_bytes", _integer("receive.message.max.bytes")),
}

# request.timeout.ms is librdkafka's produce-ack timeout; it stands in for the network request timeout only
# when socket.timeout.ms (librdkafka's real per-request network timeout) is not given.
_FALLBACKS = {"request.timeout.ms": "socket.timeout.ms"}


class ClientConfig(Mapping[str, object]):
    """Translated kafka-python settings: a read-only mapping whose repr never shows a secret."""

    def __init__(self, settings: Mapping[str, object]) -> None:
        self._settings = dict(settings)

    def __getitem__(self, key: str) -> object:
        return self._settings[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._settings)

    def __len__(self) -> int:
        return len(self._settings)

    def __repr__(self) -> str:
        return f"ClientConfig({redact(self._settings)!r})"

    __str__ = __repr__


def _bare(key: str) -> str:
    return key.strip().lower().removeprefix("kafka.")


def translate(config: Mapping[str, object]) -> ClientConfig:
    """Translate librdkafka settings (keys with or without the ``kafka.`` prefix, any case) into
    kafka-python connection keywords. Tuning settings are ignored; a security-relevant setting that
    cannot be translated raises :class:`UnsupportedSettingError` (a ``ValueError``) naming it (never its value)."""
    settings = {_bare(key): value for key, value in config.items()}
    for fallback, primary in _FALLBACKS.items():
        if fallback in settings and primary not in settings:
            settings[primary] = settings[fallback]
    out: dict[str, object] = {}
    for key, value in settings.items():
        if key in _OIDC_SETTINGS or key in TLS_SETTINGS or key in _KERBEROS_LOGIN:
            continue
        if key in _TRANSLATIONS:
            target, parse = _TRANSLATIONS[key]
            try:
                parsed = parse(value)
            except ValueError as err:
                raise UnsupportedSettingError(key, str(err)) from None
            out[target] = parsed
        elif key in _UNSUPPORTED_HINTS:
            raise UnsupportedSettingError(key, f"{key} is not supported by the transaction session: {_UNSUPPORTED_HINTS[key]}")
        elif key.startswith(_SECURITY_PREFIXES) and key not in _IGNORED_SECURITY:
            raise UnsupportedSettingError(
                key, f"{key} affects how the brokers are reached or authenticated and cannot be translated "
                "for the transaction session (kafka-python); remove it or use a supported equivalent"
            )
    if str(out.get("security_protocol", "")).endswith("SSL"):
        out["ssl_context"] = tls_context({key: _text(value) for key, value in settings.items() if key in TLS_SETTINGS})
    if out.get("sasl_mechanism") == "OAUTHBEARER":
        out["sasl_oauth_token_provider"] = _oauth_provider(settings)
    if out.get("sasl_mechanism") == "AWS_MSK_IAM":
        _check_msk_iam()
    if out.get("sasl_mechanism") and not str(out.get("security_protocol", "")).startswith("SASL_"):
        raise UnsupportedSettingError("sasl.mechanism", "sasl.mechanism is set but security.protocol is not SASL_PLAINTEXT or SASL_SSL")
    if out.get("sasl_mechanism") == "GSSAPI" and _KERBEROS_LOGIN & settings.keys():
        out["sasl_kerberos_name"] = _kerberos_login(settings)
    return ClientConfig(out)


def _oauth_provider(settings: Mapping[str, object]) -> object:
    """The token provider for OAUTHBEARER: only OIDC client credentials can be expressed in settings
    (librdkafka's other method needs a callback in code)."""
    from spark_kafka_eos._internal.config.oauth import OidcClientCredentials

    if _text(settings.get("sasl.oauthbearer.method", "default")).lower() != "oidc":
        raise UnsupportedSettingError(
            "sasl.oauthbearer.method", "OAUTHBEARER needs sasl.oauthbearer.method=oidc (client credentials) for the "
            "transaction session: a token callback cannot be given as an option",
        )
    missing = [k for k in ("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.token.endpoint.url")
               if not _text(settings.get(k, ""))]
    if missing:
        raise UnsupportedSettingError(missing[0], f"OAUTHBEARER with sasl.oauthbearer.method=oidc needs {', '.join(missing)}")
    scope = _text(settings.get("sasl.oauthbearer.scope", "")) or None
    return OidcClientCredentials(
        _text(settings["sasl.oauthbearer.token.endpoint.url"]), _text(settings["sasl.oauthbearer.client.id"]),
        _text(settings["sasl.oauthbearer.client.secret"]), scope,
    )


def _kerberos_login(settings: Mapping[str, object]) -> object:
    """GSSAPI with sasl.kerberos.keytab (and .principal), as librdkafka's kinit would log in: the session logs in
    itself, here, so a bad keytab or principal fails before any data moves (see config/kerberos.py)."""
    from spark_kafka_eos._internal.config.kerberos import session_login

    keytab = settings.get("sasl.kerberos.keytab")
    principal = settings.get("sasl.kerberos.principal")
    return session_login(None if keytab is None else _text(keytab), None if principal is None else _text(principal))


def _check_msk_iam() -> None:
    """kafka-python signs AWS_MSK_IAM itself, with botocore and the environment's credentials and region."""
    if importlib.util.find_spec("botocore") is None:
        raise UnsupportedSettingError(
            "sasl.mechanism", "AWS_MSK_IAM needs botocore for the transaction session: pip install 'spark-kafka-eos[msk]'"
        )

