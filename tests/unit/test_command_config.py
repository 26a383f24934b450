"""Client settings from a Java properties file, with java.util.Properties' syntax, and from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_kafka_eos._internal.config.command_config import CommandConfigError, environment_settings, file_settings, read_properties


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return path


def test_the_syntax_of_java_properties(tmp_path: Path) -> None:
    path = write(tmp_path, "# a comment\n! another\n\n  spaced.key =  value with spaces  \ncolon:value\nblank value\n"
                           "continued=first \\\n     second\nescaped\\=key=a\\tb\\u0041\\\\\nempty=\n")
    assert read_properties(path) == {"spaced.key": "value with spaces  ", "colon": "value", "blank": "value",
                                     "continued": "first second", "escaped=key": "a\tbA\\", "empty": ""}


def test_a_bad_unicode_escape_names_the_line_not_the_value(tmp_path: Path) -> None:
    path = write(tmp_path, "ok=1\nsasl.password=secret\\u12\n")
    with pytest.raises(CommandConfigError, match=r"line 2: a \\u escape needs four hex digits") as bad:
        read_properties(path)
    assert "secret" not in str(bad.value)


@pytest.mark.parametrize("module, mechanism", [
    ("org.apache.kafka.common.security.plain.PlainLoginModule", "PLAIN"),
    ("org.apache.kafka.common.security.scram.ScramLoginModule", "SCRAM-SHA-512"),
])
def test_a_plain_or_scram_jaas_line_becomes_username_and_password(tmp_path: Path, module: str, mechanism: str) -> None:
    path = write(tmp_path, f"security.protocol=SASL_SSL\nsasl.mechanism={mechanism}\n"
                           f'sasl.jaas.config={module} required username="alice" password="p\\\\"w";\n')
    assert file_settings(path) == {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
                                   "sasl.username": "alice", "sasl.password": 'p"w'}


def test_another_jaas_module_is_kept_to_be_refused_with_its_hint(tmp_path: Path) -> None:
    jaas = "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"
    assert file_settings(write(tmp_path, f"sasl.jaas.config={jaas}\n")) == {"sasl.jaas.config": jaas}


def test_keys_are_lower_cased_and_a_kafka_prefix_dropped(tmp_path: Path) -> None:
    assert file_settings(write(tmp_path, "Kafka.SSL.CA.Location=/ca.pem\n")) == {"ssl.ca.location": "/ca.pem"}


def test_environment_variables_name_settings_with_underscores_for_dots() -> None:
    environ = {"KAFKA_EOS_KAFKA_SASL_PASSWORD": "s", "KAFKA_EOS_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_EOS_KAFKA_": "x",
               "HOME": "/root"}
    assert environment_settings(environ) == {"sasl.password": "s", "security.protocol": "SASL_SSL"}
