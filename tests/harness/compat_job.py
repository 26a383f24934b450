"""Run by the Spark-version tier in a virtualenv with an older pyspark (tests/harness/compat.py).

    python -m tests.harness.compat_job batch BOOTSTRAP SOURCE SINK PREFIX
        a batch read of SOURCE, and an exactly-once batch write of it to SINK
    python -m tests.harness.compat_job stream BOOTSTRAP SOURCE SINK CHECKPOINT MAX_OFFSETS [FAIL_AT]
        an AvailableNow stream from SOURCE (maxOffsetsPerTrigger, unless MAX_OFFSETS is "") into the
        exactly-once sink; with FAIL_AT (``after_decision:kill-driver``), its driver dies after its first decision
    python -m tests.harness.compat_job import
        only ``import spark_kafka_eos``
    python -m tests.harness.compat_job lookup BOOTSTRAP SOURCE
        ``format("kafka_eos")`` found by Spark's auto-registration alone (no register call): what it says

Prints one JSON line; the test counts the output with its own read_committed consumer.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from tests.harness.faults import FaultInjectingDataSource, make_importable_by_workers

    make_importable_by_workers()
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(FaultInjectingDataSource)
    return spark


def batch(bootstrap: str, source: str, sink: str, prefix: str) -> dict[str, Any]:
    spark = session()
    df = spark.read.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source).load()
    read = df.count()
    (df.select("key", "value").write.format("kafka_eos").mode("append").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", sink).option("transactional.id.prefix", prefix).save())
    return {"read": read}


def stream(bootstrap: str, source: str, sink: str, checkpoint: str, max_offsets: str, fail_at: str = "") -> dict[str, Any]:
    spark = session()
    reader = (spark.readStream.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
              .option("startingOffsets", "earliest"))
    df = (reader.option("maxOffsetsPerTrigger", max_offsets) if max_offsets else reader).load()
    writer = (df.selectExpr("key", "value").writeStream.format("kafka_eos_faults" if fail_at else "kafka_eos")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
              .option("checkpointLocation", checkpoint).trigger(availableNow=True))
    if fail_at:
        writer = writer.option("testing.failAt", fail_at)
    query = writer.start()
    query.awaitTermination(300)
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    return {"batches": len(batches), "rows": [p["numInputRows"] for p in batches]}


def lookup(bootstrap: str, source: str) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        spark.read.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source).load().count()
        return {"error": None}
    except Exception as err:  # noqa: BLE001 - the error is the answer
        return {"error": str(err)}


def main(argv: list[str]) -> dict[str, Any]:
    import pyspark

    command, args = argv[0], argv[1:]
    if command == "import":
        import spark_kafka_eos  # noqa: F401 - the import is the test

        return {"pyspark": pyspark.__version__}
    if command == "lookup":
        return {"pyspark": pyspark.__version__, **lookup(*args)}
    result = batch(*args) if command == "batch" else stream(*args)
    return {"pyspark": pyspark.__version__, **result}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])), flush=True)
