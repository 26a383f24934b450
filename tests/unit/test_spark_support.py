"""Which Spark the package accepts: told by the features it needs, with one error naming what is missing."""

from __future__ import annotations

import pyspark
import pytest

from spark_kafka_eos import spark_support


def test_the_installed_pyspark_is_supported() -> None:
    assert spark_support.unsupported_spark() is None


def test_a_spark_without_stream_read_limits_is_refused_naming_them(monkeypatch: pytest.MonkeyPatch) -> None:
    real = spark_support._module
    monkeypatch.setattr(spark_support, "_module", lambda name: None if name == "pyspark.sql.streaming.datasource" else real(name))
    problem = spark_support.unsupported_spark()
    assert problem is not None
    assert f"needs pyspark 4.2 or 4.3; this is pyspark {pyspark.__version__}, which lacks stream read limits" in problem
    assert "spark-kafka-eos[spark]" in problem
    with pytest.raises(ImportError, match="lacks stream read limits"):
        spark_support.require_supported_spark()


def test_a_later_major_spark_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pyspark, "__version__", "5.0.0")
    assert "this is pyspark 5.0.0, which it was not built for" in (spark_support.unsupported_spark() or "")


def test_no_pyspark_at_all_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_support.importlib.util, "find_spec", lambda name: None)
    assert "pyspark is not installed" in (spark_support.unsupported_spark() or "")
