"""The transaction session's Kerberos login from a keytab (spark_kafka_eos/_internal/config/kerberos.py), without a KDC: the
errors that come before any connection, and how kafka-python's 'GSSAPI' entry is wrapped. The login itself, against
a real KDC and broker: tests/integration/security/test_kerberos.py."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from kafka.net import sasl

from spark_kafka_eos._internal.config import kerberos
from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.config.kafka_python import UnsupportedSettingError, translate
from spark_kafka_eos.errors import KafkaEosOptionError

GSSAPI = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka"}


def test_without_python_gssapi_the_error_names_the_setting_and_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    keytab = tmp_path / "client.keytab"
    keytab.write_bytes(b"\x05\x02")
    monkeypatch.setitem(sys.modules, "gssapi", None)
    settings = {**GSSAPI, "sasl.kerberos.keytab": str(keytab), "sasl.kerberos.principal": "client@EOS.TEST"}
    with pytest.raises(UnsupportedSettingError, match=r"sasl\.kerberos\.keytab needs python-gssapi.*spark-kafka-eos\[kerberos\]") as raised:
        translate(settings)
    assert raised.value.setting == "sasl.kerberos.keytab"
    # The sink's up-front check (its options parser calls it) turns it into an option error naming the option and the fix.
    connection = KafkaConnection.of("b1:9092", settings)
    with pytest.raises(KafkaEosOptionError, match=r"kafka\.sasl\.kerberos\.keytab.*Fix: pip install 'spark-kafka-eos\[kerberos\]'"):
        connection.check_session_settings()


def test_a_keytab_that_is_not_a_readable_file_is_refused_by_name(tmp_path: Path) -> None:
    pytest.importorskip("gssapi")
    with pytest.raises(UnsupportedSettingError, match=r"sasl\.kerberos\.keytab: no readable keytab file at .*missing\.keytab") as raised:
        translate({**GSSAPI, "sasl.kerberos.keytab": str(tmp_path / "missing.keytab"), "sasl.kerberos.principal": "client@EOS.TEST"})
    assert raised.value.setting == "sasl.kerberos.keytab"


def test_a_keytab_the_kerberos_library_cannot_log_in_with_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("gssapi")
    with socket.socket() as closed:  # a realm whose KDC does not answer: the login fails here, not in a connection
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    krb5_conf = tmp_path / "krb5.conf"
    krb5_conf.write_text(f"[libdefaults]\n default_realm = EOS.TEST\n dns_lookup_kdc = false\n udp_preference_limit = 1\n"
                         f"[realms]\n EOS.TEST = {{\n  kdc = 127.0.0.1:{port}\n }}\n")
    monkeypatch.setenv("KRB5_CONFIG", str(krb5_conf))
    keytab = tmp_path / "not-a.keytab"
    keytab.write_text("not a keytab: SECRET-LOOKING-CONTENT")
    with pytest.raises(UnsupportedSettingError, match=r"cannot log in to Kerberos as kafkaclient") as raised:
        translate({**GSSAPI, "sasl.kerberos.keytab": str(keytab)})  # librdkafka's default principal, as its kinit's
    assert raised.value.setting == "sasl.kerberos.keytab"
    assert "sasl.kerberos.principal" in str(raised.value) and "SECRET-LOOKING-CONTENT" not in str(raised.value)


def test_under_another_mechanism_the_keytab_is_librdkafkas_alone() -> None:
    translated = translate({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                            "sasl.password": "pw", "sasl.kerberos.keytab": "/nonexistent.keytab", "sasl.kerberos.principal": "a@B"})
    assert "sasl_kerberos_name" not in translated


def test_the_gssapi_entry_is_wrapped_once_and_leaves_every_other_connection_to_the_mechanism_before(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, object]] = []

    def before(**config: object) -> str:
        made.append(config)
        return "the mechanism registered before"

    monkeypatch.setitem(sasl.SASL_MECHANISMS, "GSSAPI", before)
    kerberos._install()
    kerberos._install()
    entry = sasl.get_sasl_mechanism("GSSAPI")
    assert isinstance(entry, kerberos._GssapiMechanisms) and entry.fallback is before
    config = {"host": "b1", "sasl_kerberos_service_name": "kafka", "sasl_kerberos_name": None}
    assert entry(**config) == "the mechanism registered before"
    assert made == [config]


def test_a_principal_without_a_keytab_and_without_a_kinit_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("gssapi")
    krb5_conf = tmp_path / "krb5.conf"
    krb5_conf.write_text(f"[libdefaults]\n default_realm = EOS.TEST\n default_ccache_name = FILE:{tmp_path}/no-such-ccache\n")
    monkeypatch.setenv("KRB5_CONFIG", str(krb5_conf))
    with pytest.raises(UnsupportedSettingError, match=r"as client@EOS\.TEST \(sasl\.kerberos\.principal\) from the default ticket cache, a kinit's") as raised:
        translate({**GSSAPI, "sasl.kerberos.principal": "client@EOS.TEST"})
    assert raised.value.setting == "sasl.kerberos.principal"
