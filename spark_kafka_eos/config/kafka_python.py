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

from spark_kafka_eos.config.librdkafka import JAVA_ONLY_SETTINGS
from spark_kafka_eos.config.secrets import redact


class UnsupportedSettingError(ValueError):
    """A setting the transaction session cannot honour; ``setting`` is its librdkafka name (never its value)."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting


_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
_SASL_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER", "AWS_MSK_IAM"})
_DNS_LOOKUPS = frozenset({"use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"})

# OAUTHBEARER with OIDC client credentials: these settings become one token provider (see _oauth_provider).
_OIDC_SETTINGS = frozenset({
    "sasl.oauthbearer.method", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope",
})

# Settings whose names look like security settings but that only librdkafka's data path uses and
# that cannot weaken or change how the coordinator connection is authenticated.
_IGNORED_SECURITY = frozenset({"sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin"})

# A security setting (by prefix) that is neither translated nor ignored is refused.
_SECURITY_PREFIXES = ("ssl.", "sasl.", "security.", "ssl_", "sasl_", "enable.ssl.", "https.")

# Why some security settings are refused, so the error can say what to use instead.
_UNSUPPORTED_HINTS = {
    "ssl.ca.pem": "write the PEM to a file and use ssl.ca.location",
    "ssl.certificate.pem": "write the PEM to a file and use ssl.certificate.location",
    "ssl.key.pem": "write the PEM to a file and use ssl.key.location",
    "ssl.keystore.location": "convert the PKCS#12 keystore to PEM files (ssl.certificate.location, ssl.key.location)",
    "ssl.keystore.password": "convert the PKCS#12 keystore to PEM files (ssl.certificate.location, ssl.key.location)",
    "sasl.kerberos.keytab": "run kinit for the principal before starting; kafka-python uses the ticket cache",
    "sasl.kerberos.principal": "run kinit for the principal before starting; kafka-python uses the ticket cache",
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


def _file(key: str) -> Callable[[object], str]:
    def parse(value: object) -> str:
        text = _text(value)
        if text.lower() == "probe":
            raise ValueError(f"{key}=probe (search system CA locations) is librdkafka-only; give a PEM file path")
        return text

    return parse


def _hostname_check(value: object) -> bool:
    text = _text(value).lower()
    if text not in ("https", "none", ""):
        raise ValueError(f"ssl.endpoint.identification.algorithm={text!r} is not supported; use 'https' or 'none'")
    return text == "https"


def _certificate_verification(value: object) -> None:
    if _text(value).lower() not in ("true", "1"):
        raise ValueError(
            "enable.ssl.certificate.verification=false cannot be translated for the transaction session "
            "(kafka-python always verifies certificates); give the broker's CA with ssl.ca.location instead"
        )


# librdkafka name -> (kafka-python keyword, parser). A None keyword validates without translating.
_TRANSLATIONS: dict[str, tuple[str | None, Callable[[object], object]]] = {
    "bootstrap.servers": ("bootstrap_servers", _text),
    "metadata.broker.list": ("bootstrap_servers", _text),
    "client.id": ("client_id", _text),
    "security.protocol": ("security_protocol", _one_of("security.protocol", _SECURITY_PROTOCOLS)),
    "sasl.mechanism": ("sasl_mechanism", _one_of("sasl.mechanism", _SASL_MECHANISMS)),
    "sasl.mechanisms": ("sasl_mechanism", _one_of("sasl.mechanisms", _SASL_MECHANISMS)),
    "sasl.username": ("sasl_plain_username", _text),
    "sasl.password": ("sasl_plain_password", _text),
    "sasl.kerberos.service.name": ("sasl_kerberos_service_name", _text),
    "ssl.ca.location": ("ssl_cafile", _file("ssl.ca.location")),
    "ssl.certificate.location": ("ssl_certfile", _file("ssl.certificate.location")),
    "ssl.key.location": ("ssl_keyfile", _file("ssl.key.location")),
    "ssl.key.password": ("ssl_password", _text),
    "ssl.crl.location": ("ssl_crlfile", _file("ssl.crl.location")),
    "ssl.endpoint.identification.algorithm": ("ssl_check_hostname", _hostname_check),
    "enable.ssl.certificate.verification": (None, _certificate_verification),
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
        if key in _OIDC_SETTINGS:
            continue
        if key in _TRANSLATIONS:
            target, parse = _TRANSLATIONS[key]
            try:
                parsed = parse(value)
            except ValueError as err:
                raise UnsupportedSettingError(key, str(err)) from None
            if target is not None:
                out[target] = parsed
        elif key in _UNSUPPORTED_HINTS:
            raise UnsupportedSettingError(key, f"{key} is not supported by the transaction session: {_UNSUPPORTED_HINTS[key]}")
        elif key.startswith(_SECURITY_PREFIXES) and key not in _IGNORED_SECURITY:
            raise UnsupportedSettingError(
                key, f"{key} affects how the brokers are reached or authenticated and cannot be translated "
                "for the transaction session (kafka-python); remove it or use a supported equivalent"
            )
    if out.get("sasl_mechanism") == "OAUTHBEARER":
        out["sasl_oauth_token_provider"] = _oauth_provider(settings)
    if out.get("sasl_mechanism") == "AWS_MSK_IAM":
        _check_msk_iam()
    if out.get("sasl_mechanism") and not str(out.get("security_protocol", "")).startswith("SASL_"):
        raise UnsupportedSettingError("sasl.mechanism", "sasl.mechanism is set but security.protocol is not SASL_PLAINTEXT or SASL_SSL")
    return ClientConfig(out)


def _oauth_provider(settings: Mapping[str, object]) -> object:
    """The token provider for OAUTHBEARER: only OIDC client credentials can be expressed in settings
    (librdkafka's other method needs a callback in code)."""
    from spark_kafka_eos.config.oauth import OidcClientCredentials

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


def _check_msk_iam() -> None:
    """kafka-python signs AWS_MSK_IAM itself, with botocore and the environment's credentials and region."""
    if importlib.util.find_spec("botocore") is None:
        raise UnsupportedSettingError(
            "sasl.mechanism", "AWS_MSK_IAM needs botocore for the transaction session: pip install 'spark-kafka-eos[msk]'"
        )

