"""AWS MSK IAM: the configuration mapping for librdkafka and for the transaction session (AWS itself
cannot be reached from here, so the signer is a stand-in with the real module's interface)."""

from __future__ import annotations

import sys
import types

import pytest

from spark_kafka_eos._internal.config.kafka_python import UnsupportedSettingError, translate
from spark_kafka_eos._internal.config.librdkafka import RECONNECT_BACKOFF_MAX_MS, RECONNECT_BACKOFF_MS, for_librdkafka
from spark_kafka_eos._internal.librdkafka_logs import LIBRDKAFKA_LOGGER
from spark_kafka_eos.errors import KafkaEosOptionError

MSK = {"bootstrap.servers": "b-1.msk:9098", "security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM"}


@pytest.fixture
def signer(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """aws_msk_iam_sasl_signer with MSKAuthTokenProvider.generate_auth_token(region) -> (token, expiry ms)."""
    regions: list[str] = []

    class MSKAuthTokenProvider:
        @staticmethod
        def generate_auth_token(region: str) -> tuple[str, int]:
            regions.append(region)
            return f"signed-for-{region}", 1_800_000_000_000

    module = types.ModuleType("aws_msk_iam_sasl_signer")
    module.MSKAuthTokenProvider = MSKAuthTokenProvider  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "aws_msk_iam_sasl_signer", module)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    return regions


def test_msk_iam_becomes_oauthbearer_with_a_signing_callback(signer: list[str]) -> None:
    config = for_librdkafka(MSK)
    assert config["sasl.mechanism"] == "OAUTHBEARER" and config["security.protocol"] == "SASL_SSL"
    assert config["logger"] is LIBRDKAFKA_LOGGER
    assert config["oauth_cb"]("") == ("signed-for-eu-west-1", 1_800_000_000.0)
    assert signer == ["eu-west-1"]


def test_other_mechanisms_are_left_alone() -> None:
    plain = {"sasl.mechanism": "SCRAM-SHA-512", "security.protocol": "SASL_SSL"}
    assert for_librdkafka(plain) == {**plain, "logger": LIBRDKAFKA_LOGGER, "reconnect.backoff.ms": RECONNECT_BACKOFF_MS,
                                     "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS}


def test_a_reconnect_backoff_the_user_set_is_kept() -> None:
    config = for_librdkafka({"reconnect.backoff.ms": 250, "reconnect.backoff.max.ms": 5000})
    assert (config["reconnect.backoff.ms"], config["reconnect.backoff.max.ms"]) == (250, 5000)


def test_without_the_signer_the_error_names_the_option_and_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aws_msk_iam_sasl_signer", None)
    with pytest.raises(KafkaEosOptionError, match=r"kafka\.sasl\.mechanism.*spark-kafka-eos\[msk\]"):
        for_librdkafka(MSK)


def test_without_a_region_the_error_names_the_variables(signer: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with pytest.raises(KafkaEosOptionError, match="AWS_REGION or AWS_DEFAULT_REGION"):
        for_librdkafka(MSK)


def test_the_transaction_session_uses_kafka_pythons_msk_iam(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "botocore", types.ModuleType("botocore"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object() if name == "botocore" else None)
    assert translate(MSK)["sasl_mechanism"] == "AWS_MSK_IAM"
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    with pytest.raises(UnsupportedSettingError, match=r"botocore.*spark-kafka-eos\[msk\]"):
        translate(MSK)
