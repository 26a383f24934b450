"""The stated public API: what ``__all__`` names exists, the errors carry their Kafka code, and
``help(KafkaEosDataSource)`` is the manual (it names every option)."""

from __future__ import annotations

import spark_kafka_eos
from spark_kafka_eos import KafkaEosDataSource
from spark_kafka_eos._internal.config.options import READER_OPTIONS, WRITER_AND_SPARK_OPTIONS
from spark_kafka_eos.errors import KafkaEosError


def test_every_name_in_all_is_exported() -> None:
    assert spark_kafka_eos.__all__ and all(hasattr(spark_kafka_eos, name) for name in spark_kafka_eos.__all__)


def test_every_error_class_is_public_and_carries_a_kafka_code_attribute() -> None:
    errors = [getattr(spark_kafka_eos, name) for name in spark_kafka_eos.__all__ if name.endswith("Error")]
    assert KafkaEosError in errors and all(issubclass(error, KafkaEosError) for error in errors)
    assert KafkaEosError("boom").code is None


def test_the_data_source_docstring_names_every_option() -> None:
    manual = KafkaEosDataSource.__doc__ or ""
    documented_elsewhere = {"path"}  # Spark's own, never needed by a kafka_eos query
    missing = [name for name in READER_OPTIONS + WRITER_AND_SPARK_OPTIONS
               if name not in documented_elsewhere and f"``{name}``" not in manual]
    assert missing == []
