"""Which Spark this package runs on: pyspark 4.0 to 4.3, told by the features it needs, not by version
strings (a vendor's build may carry another). Imports nothing of pyspark until asked.

Spark 4.2 added admission control for Python stream sources (read limits, Trigger.AvailableNow);
on 4.0 and 4.1 the stream reader works without it (:mod:`spark_kafka_eos._internal.read.legacy_stream_reader`).
Spark 4.1 added Arrow stream writers; on 4.0 :mod:`spark_kafka_eos._internal.write.legacy_stream_writer` gets
record batches another way."""

from __future__ import annotations

import importlib
import importlib.util

SUPPORTED = "pyspark 4.0 to 4.3"
_FIX = ("On a cluster, use a runtime with Spark 4.0 to 4.3 (Databricks Runtime 17.3 LTS and later); the package never "
        "installs pyspark over a runtime's own. Locally: pip install 'spark-kafka-eos[spark]'.")


def unsupported_spark() -> str | None:
    """Why the installed pyspark cannot run kafka_eos, or None if it can."""
    if importlib.util.find_spec("pyspark") is None:
        return f"spark-kafka-eos needs {SUPPORTED}, and pyspark is not installed. {_FIX}"
    pyspark = importlib.import_module("pyspark")
    version = getattr(pyspark, "__version__", "unknown")
    missing = [feature for feature, present in _features() if not present]
    if missing:
        return (f"spark-kafka-eos needs {SUPPORTED}; this is pyspark {version}, which lacks {', '.join(missing)}. {_FIX}")
    major = version.split(".")[0]
    if major.isdigit() and int(major) > 4:
        return f"spark-kafka-eos supports {SUPPORTED}; this is pyspark {version}, which it was not built for. {_FIX}"
    return None


def require_supported_spark() -> None:
    """Raise ImportError, with :func:`unsupported_spark`'s reason, unless the installed pyspark can run kafka_eos."""
    problem = unsupported_spark()
    if problem is not None:
        raise ImportError(problem)


def has_arrow_stream_writers() -> bool:
    """Spark 4.1+: ``DataSourceStreamArrowWriter``."""
    return hasattr(_module("pyspark.sql.datasource"), "DataSourceStreamArrowWriter")


def has_read_limits() -> bool:
    """Spark 4.2+: the engine passes read limits to Python stream sources and asks them for
    Trigger.AvailableNow's target."""
    streaming = _module("pyspark.sql.streaming.datasource")
    return hasattr(streaming, "ReadLimit") and hasattr(streaming, "SupportsTriggerAvailableNow")


def _features() -> list[tuple[str, bool]]:
    datasource = _module("pyspark.sql.datasource")
    return [
        ("Python data sources (pyspark.sql.datasource)", datasource is not None),
        ("Arrow batch writers (DataSourceArrowWriter)", hasattr(datasource, "DataSourceArrowWriter")),
    ]


def _module(name: str) -> object | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
