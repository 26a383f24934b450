"""Writing from a thread of its own (a thread pool of backfills, a notebook running writes concurrently).

pyspark 4 resolves a Python data source for ``df.write`` / ``df.writeStream`` through the active session
of the JVM thread that serves the calling Python thread. A Python thread other than the one that made
the session has none there, so ``format("kafka_eos")`` fails with ``DATA_SOURCE_NOT_FOUND`` although
reads work. :func:`activate_session` sets it; call it first in each thread that writes.
"""

from __future__ import annotations

from pyspark.sql import SparkSession


def activate_session(spark: SparkSession) -> None:
    """Make ``spark`` the active session of the calling thread, in Python and in its JVM thread.
    A Spark Connect session needs nothing (the server resolves data sources), so it is left alone."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return
    SparkSession._activeSession = spark
    SparkSession._get_j_spark_session_class(jvm).setActiveSession(spark._jsparkSession)
