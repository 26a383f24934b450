"""librdkafka settings -> kafka-python keywords for the transaction session (no broker)."""

from __future__ import annotations

import pytest

from spark_kafka_eos._internal.config.kafka_python import ClientConfig, translate
from spark_kafka_eos._internal.txn.session import TransactionSession

PASSWORD = "s3cr3t-Pa55"
KEY_PASSWORD = "k3y-Pa55"


def test_translation_table() -> None:
    translated = translate(
        {
            "kafka.bootstrap.servers": "b1:9093,b2:9093",
            "kafka.security.protocol": "sasl_ssl",
            "kafka.sasl.mechanisms": "SCRAM-SHA-512",
            "kafka.sasl.username": "alice",
            "kafka.sasl.password": PASSWORD,
            "kafka.client.id": "etl",
            "kafka.socket.timeout.ms": "15000",
            "kafka.request.timeout.ms": "99999",
        }
    )
    assert dict(translated) == {
        "bootstrap_servers": "b1:9093,b2:9093",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": PASSWORD,
        "ssl_context": translated["ssl_context"],
        "client_id": "etl",
        "request_timeout_ms": 15000,
    }


def test_request_timeout_stands_in_for_socket_timeout_and_keys_are_case_insensitive() -> None:
    translated = translate({"Request.Timeout.MS": 2500, "SASL.MECHANISM": "plain", "security.protocol": "SASL_PLAINTEXT"})
    assert translated["request_timeout_ms"] == 2500
    assert translated["sasl_mechanism"] == "PLAIN"
    assert "ssl_context" not in translate({"ssl.endpoint.identification.algorithm": "https"})


def test_data_path_tuning_is_ignored() -> None:
    ignored = {
        "linger.ms": "5", "acks": "all", "compression.type": "zstd", "isolation.level": "read_committed",
        "enable.idempotence": "true", "transactional.id": "x", "transaction.timeout.ms": "60000",
        "batch.size": "1000000", "enable.auto.commit": "false", "sasl.kerberos.kinit.cmd": "kinit",
        "enable.ssl.certificate.verification": "true",
    }
    assert dict(translate(ignored)) == {}


@pytest.mark.parametrize(
    "key, value",
    [
        ("ssl.engine.id", "pkcs11"),
        ("ssl.providers", "legacy,default"),
        ("sasl.oauthbearer.config", "principal=admin"),  # unsecured client-side tokens: librdkafka only
        ("ssl.truststore.location", "/etc/trust.jks"),
        ("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required;"),
    ],
)
def test_untranslatable_security_setting_is_refused_by_name(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=key.replace(".", r"\.")) as raised:
        translate({f"kafka.{key}": value})
    assert value not in str(raised.value)


@pytest.mark.parametrize(
    "config, named",
    [
        ({"security.protocol": "SSL_TLS"}, "security.protocol"),
        ({"sasl.mechanism": "OAUTHBEARER", "security.protocol": "SASL_SSL"}, "sasl.oauthbearer.method"),
        ({"sasl.mechanism": "OAUTHBEARER", "security.protocol": "SASL_SSL", "sasl.oauthbearer.method": "oidc"}, "sasl.oauthbearer.client.id"),
        ({"sasl.mechanism": "PLAIN"}, "sasl.mechanism"),
        ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}, "ssl.ca.location"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "ssl.endpoint.identification.algorithm": "dns"},
         "ssl.endpoint.identification.algorithm"),
        ({"socket.timeout.ms": "soon"}, "socket.timeout.ms"),
    ],
)
def test_invalid_values_are_refused_by_name(config: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        translate(config)


def test_translated_config_never_shows_secrets() -> None:
    translated = translate({"sasl.password": PASSWORD, "ssl.key.password": KEY_PASSWORD, "sasl.username": "alice"})
    assert isinstance(translated, ClientConfig)
    for text in (repr(translated), str(translated)):
        assert PASSWORD not in text and KEY_PASSWORD not in text
        assert "alice" in text


def test_session_repr_never_shows_secrets() -> None:
    config = {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.username": "alice",
        "kafka.sasl.password": PASSWORD,
        "kafka.ssl.key.password": KEY_PASSWORD,
    }
    # Constructing a session does no network I/O: nothing listens on this address.
    with TransactionSession("127.0.0.1:9", config) as session:
        for text in (repr(session), str(session)):
            assert PASSWORD not in text and KEY_PASSWORD not in text
            assert "127.0.0.1:9" in text


def test_oidc_client_credentials_become_a_token_provider_without_showing_the_secret() -> None:
    config = translate({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "job", "sasl.oauthbearer.client.secret": "hush-123",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token", "sasl.oauthbearer.scope": "kafka",
    })
    assert config["sasl_mechanism"] == "OAUTHBEARER"
    provider = config["sasl_oauth_token_provider"]
    assert type(provider).__name__ == "OidcClientCredentials"
    assert "hush-123" not in repr(config) and "hush-123" not in repr(provider)

