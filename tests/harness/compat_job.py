"""Run by the Spark-version tier in a virtualenv with an older pyspark (tests/harness/compat.py).

    python -m tests.harness.compat_job first-run BOOTSTRAP SOURCE BATCH_SINK PREFIX STREAM_SINK CHECKPOINT MAX_OFFSETS
        a batch read of SOURCE and an exactly-once batch write of it to BATCH_SINK; with MAX_OFFSETS "",
        a stream with maxOffsetsPerTrigger is started too, to show its refusal. Prints a JSON line, then
        starts an AvailableNow stream from SOURCE (maxOffsetsPerTrigger MAX_OFFSETS, unless "") into
        the exactly-once sink STREAM_SINK, whose driver dies after its first decision
    python -m tests.harness.compat_job restart BOOTSTRAP SOURCE STREAM_SINK CHECKPOINT MAX_OFFSETS
        that stream again, from its checkpoint, to the end, with Spark's Trigger.AvailableNow wrapper
        off (the default) and then on; prints a JSON line with the rows of each run's micro-batches

One Spark driver for everything before the crash: each costs a JVM start. The test counts the output
with its own read_committed consumer.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

KILL_AFTER_DECISION = "after_decision:kill-driver"
# Spark 4.0 and 4.1 run Trigger.AvailableNow on a source without it (a Python one) as Trigger.Once unless
# this is true: one micro-batch, or only the interrupted one on a restart.
AVAILABLE_NOW_WRAPPER = "spark.sql.streaming.triggerAvailableNowWrapper.enabled"


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


def batch(spark: Any, bootstrap: str, source: str, sink: str, prefix: str) -> int:
    df = spark.read.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source).load()
    read = df.count()
    (df.select("key", "value").write.format("kafka_eos").mode("append").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", sink).option("transactional.id.prefix", prefix).save())
    return int(read)


def start_stream(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: str, max_offsets: str, fail_at: str = "") -> Any:
    reader = (spark.readStream.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
              .option("startingOffsets", "earliest"))
    df = (reader.option("maxOffsetsPerTrigger", max_offsets) if max_offsets else reader).load()
    writer = (df.selectExpr("key", "value").writeStream.format("kafka_eos_faults" if fail_at else "kafka_eos")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
              .option("checkpointLocation", checkpoint).trigger(availableNow=True))
    if fail_at:
        writer = writer.option("testing.failAt", fail_at)
    return writer.start()


def refusal_of_max_offsets(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: str) -> str | None:
    """What a stream with maxOffsetsPerTrigger fails with (None if it runs)."""
    try:
        start_stream(spark, bootstrap, source, sink, checkpoint, "30").awaitTermination(120)
    except Exception as err:  # noqa: BLE001 - the error is the answer
        return str(err)
    return None


def main(argv: list[str]) -> dict[str, Any]:
    import pyspark

    spark = session()
    java = str(spark.sparkContext._jvm.System.getProperty("java.specification.version"))
    versions = {"pyspark": pyspark.__version__, "python": f"{sys.version_info.major}.{sys.version_info.minor}", "java": java}
    command, bootstrap, source = argv[:3]
    if command == "first-run":
        batch_sink, prefix, stream_sink, checkpoint, max_offsets = argv[3:]
        read = batch(spark, bootstrap, source, batch_sink, prefix)
        refusal = None if max_offsets else refusal_of_max_offsets(spark, bootstrap, source, stream_sink, checkpoint + "-refused")
        print(json.dumps({**versions, "read": read, "refusal": refusal}), flush=True)
        start_stream(spark, bootstrap, source, stream_sink, checkpoint, max_offsets, KILL_AFTER_DECISION).awaitTermination(300)
        return {"error": "the driver outlived its kill"}
    stream_sink, checkpoint, max_offsets = argv[3:]
    rows = {}
    for wrapper in ("false", "true"):
        spark.conf.set(AVAILABLE_NOW_WRAPPER, wrapper)
        query = start_stream(spark, bootstrap, source, stream_sink, checkpoint, max_offsets)
        query.awaitTermination(300)
        rows[wrapper] = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]
    return {**versions, "rows": rows["false"], "rows_with_wrapper": rows["true"]}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])), flush=True)
