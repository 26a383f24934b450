"""The validated connection (bootstrap + connection settings) that reader and writer options share (no broker)."""

from __future__ import annotations

import pytest

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.config.writer import parse_writer_options
from spark_kafka_eos._internal.txn.session import TxnSessionError
from spark_kafka_eos.errors import KafkaEosError, KafkaEosOptionError

PASSWORD = "s3cr3t-Pa55"
WRITER = {"kafka.bootstrap.servers": "b1:9092", "topic": "out", "transactional.id.prefix": "p"}
SECURITY = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "alice",
            "kafka.sasl.password": PASSWORD}


def test_reader_and_writer_build_the_same_connection_from_the_same_settings() -> None:
    tuning = {"kafka.linger.ms": "20", "kafka.fetch.wait.max.ms": "10"}
    writer = parse_writer_options({**WRITER, **SECURITY, "kafka.linger.ms": "20"}, streaming=False)
    reader = parse_reader_options({"kafka.bootstrap.servers": "b1:9092", "subscribe": "in", **SECURITY, **tuning}, streaming=False)
    assert writer.connection == reader.connection
    assert writer.connection.client_config() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": PASSWORD,
        "bootstrap.servers": "b1:9092",
    }
    assert writer.bootstrap_servers == reader.bootstrap_servers == "b1:9092"
    assert PASSWORD not in repr(writer.connection)


def test_a_setting_the_transaction_session_cannot_honour_is_an_option_error_of_the_writer() -> None:
    with pytest.raises(KafkaEosOptionError, match=r"kafka\.ssl\.engine\.id") as raised:
        parse_writer_options({**WRITER, "kafka.ssl.engine.id": "pkcs11"}, streaming=False)
    assert isinstance(raised.value, ValueError)


def test_a_keystore_the_transaction_session_cannot_open_is_an_option_error_before_any_data_moves() -> None:
    with pytest.raises(KafkaEosOptionError, match=r"kafka\.ssl\.keystore\.location") as raised:
        parse_writer_options({**WRITER, "kafka.security.protocol": "SSL", "kafka.ssl.keystore.location": "/etc/client.p12",
                              "kafka.ssl.keystore.password": PASSWORD}, streaming=False)
    assert PASSWORD not in str(raised.value)


def test_the_reader_has_no_session_and_keeps_accepting_what_librdkafka_accepts() -> None:
    options = parse_reader_options({"kafka.bootstrap.servers": "b1:9092", "subscribe": "in",
                                    "kafka.ssl.keystore.location": "/etc/client.p12"}, streaming=False)
    assert dict(options.connection.settings) == {"ssl.keystore.location": "/etc/client.p12"}


def test_session_errors_are_of_the_package_error_family() -> None:
    assert issubclass(TxnSessionError, KafkaEosError)
