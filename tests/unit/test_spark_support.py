"""Which Spark the package accepts: told by the features it needs, with one error naming what is missing."""

from __future__ import annotations

import importlib
import sys

import pyspark
import pytest

from spark_kafka_eos._internal import spark_support


def test_the_installed_pyspark_is_supported() -> None:
    assert spark_support.unsupported_spark() is None


def test_a_spark_without_arrow_writers_is_refused_naming_them(monkeypatch: pytest.MonkeyPatch) -> None:
    real = spark_support._module

    class DatasourceWithoutArrowWriters:
        DataSource = object

    monkeypatch.setattr(spark_support, "_module", lambda name: DatasourceWithoutArrowWriters if name == "pyspark.sql.datasource" else real(name))
    problem = spark_support.unsupported_spark()
    assert problem is not None
    assert f"needs pyspark 4.0 to 4.3; this is pyspark {pyspark.__version__}, which lacks Arrow batch writers" in problem
    assert "spark-kafka-eos[spark]" in problem
    with pytest.raises(ImportError, match="lacks Arrow batch writers"):
        spark_support.require_supported_spark()


def test_features_of_later_sparks_are_told_by_their_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    assert spark_support.has_arrow_stream_writers()  # the main suite's pyspark 4.3
    real = spark_support._module

    class DatasourceOfSpark40:
        DataSource = DataSourceArrowWriter = object

    monkeypatch.setattr(spark_support, "_module", lambda name: DatasourceOfSpark40 if name == "pyspark.sql.datasource" else real(name))
    assert not spark_support.has_arrow_stream_writers()
    assert spark_support.unsupported_spark() is None  # Spark 4.0: supported, with the legacy stream writer


def test_the_auto_registration_shim_turns_an_unsupported_spark_into_the_sources_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark imports every pyspark_* module in one lookup: the shim must not raise, and kafka_eos must say why."""
    monkeypatch.setattr(pyspark, "__version__", "5.0.0")
    for name in [m for m in sys.modules if m == "spark_kafka_eos" or m.startswith(("spark_kafka_eos.", "pyspark_kafka_eos"))]:
        monkeypatch.delitem(sys.modules, name)
    shim = importlib.import_module("pyspark_kafka_eos")
    assert shim.DefaultSource.name() == "kafka_eos"
    with pytest.raises(ImportError, match="this is pyspark 5.0.0, which it was not built for"):
        shim.DefaultSource({})


def test_read_limits_are_told_by_the_streaming_datasource_module(monkeypatch: pytest.MonkeyPatch) -> None:
    assert spark_support.has_read_limits()  # the main suite's pyspark 4.3
    real = spark_support._module
    monkeypatch.setattr(spark_support, "_module", lambda name: None if name == "pyspark.sql.streaming.datasource" else real(name))
    assert not spark_support.has_read_limits()
    assert spark_support.unsupported_spark() is None  # Spark 4.1: supported, with the legacy stream reader


def test_a_later_major_spark_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pyspark, "__version__", "5.0.0")
    assert "this is pyspark 5.0.0, which it was not built for" in (spark_support.unsupported_spark() or "")


def test_no_pyspark_at_all_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_support.importlib.util, "find_spec", lambda name: None)
    assert "pyspark is not installed" in (spark_support.unsupported_spark() or "")
