"""The package's names for librdkafka's error codes are librdkafka's, on both engines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

import spark_kafka_eos._internal
from spark_kafka_eos._internal.client_errors import ClientError, KafkaErrorCode
from spark_kafka_eos._internal.native.extension import native_module


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


_RULES = ("client_errors.py", "read/partition_reader.py", "read/fetchers/range_fetcher.py", "write/task_producer.py",
          "write/delivery_reports.py", "write/producers/producer_client.py")
_CLIENT_LIBRARIES = {"confluent_kafka", "kafka", "spark_kafka_eos_native"}


@pytest.mark.parametrize("module", _RULES)
def test_the_read_and_write_rules_import_no_kafka_client_library(module: str) -> None:
    """Only the engines' adapters (read/fetchers/, write/producers/) speak a client library's errors."""
    tree = ast.parse((Path(spark_kafka_eos._internal.__file__).parent / module).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & _CLIENT_LIBRARIES
