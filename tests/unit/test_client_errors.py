"""The package's names for librdkafka's error codes are librdkafka's, on both engines."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from spark_kafka_eos.client_errors import ClientError, KafkaErrorCode
from spark_kafka_eos.native_extension import native_module


def _librdkafka_name(code: KafkaErrorCode) -> str:
    return f"_{code.name}" if code < 0 else code.name


@pytest.mark.parametrize("code", list(KafkaErrorCode), ids=lambda c: c.name)
def test_each_code_is_librdkafkas_code_of_that_name(code: KafkaErrorCode) -> None:
    assert getattr(KafkaError, _librdkafka_name(code)) == code
    assert KafkaError(code).name() == _librdkafka_name(code)


@pytest.mark.parametrize("code", [KafkaErrorCode.MSG_TIMED_OUT, KafkaErrorCode.QUEUE_FULL], ids=lambda c: c.name)
def test_a_local_error_the_rules_make_up_reads_as_librdkafkas(code: KafkaErrorCode) -> None:
    made_up, reported = ClientError.local(code), KafkaError(code)
    assert (made_up.code, made_up.name, made_up.description) == (reported.code(), reported.name(), reported.str())


def test_the_compiled_extension_names_each_code_as_confluent_kafka_does() -> None:
    native = native_module()
    if native is None:
        pytest.skip("spark-kafka-eos-native is not installed (make native)")
    for code in KafkaErrorCode:
        assert native.error_name(code) == (KafkaError(code).name(), KafkaError(code).str())
