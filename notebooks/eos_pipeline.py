# Databricks notebook source
# MAGIC %md
# MAGIC # Exactly-once Kafka -> Spark -> Kafka
# MAGIC
# MAGIC Reads `SOURCE` read_committed, transforms, and writes `SINK` exactly once: every micro-batch
# MAGIC is one two-phase commit coordinated by the driver, and the consumed offsets are committed to
# MAGIC `GROUP` inside the same decision. Run as a script:
# MAGIC `python notebooks/eos_pipeline.py BOOTSTRAP SOURCE SINK CHECKPOINT [--crash-after-decision]`.

# COMMAND ----------

import argparse
import os
import sys

from pyspark.sql import SparkSession

parser = argparse.ArgumentParser()
parser.add_argument("bootstrap")
parser.add_argument("source")
parser.add_argument("sink")
parser.add_argument("checkpoint")
parser.add_argument("--group", default="orders-etl")
parser.add_argument("--crash-after-decision", action="store_true", help="kill the driver between decision and phase 2 (demo)")
args = parser.parse_args()
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
if args.crash_after_decision:  # the Python workers import the fault-injecting source from tests/
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.environ.get("PYTHONPATH")]))

spark = (
    SparkSession.builder.master("local[2]").appName("kafka_eos pipeline")
    .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")

# COMMAND ----------

orders = (
    spark.readStream.format("kafka_eos")
    .option("kafka.bootstrap.servers", args.bootstrap)
    .option("subscribe", args.source)
    .option("startingOffsets", "earliest")
    .option("maxOffsetsPerTrigger", 1000)
    .load()
)
enriched = orders.selectExpr(
    "key",
    "CONCAT('processed:', CAST(value AS STRING)) AS value",
    "partition",
    # The source position rides along: the driver commits max + 1 per partition to the group.
    "topic AS source_topic", "partition AS source_partition", "offset AS source_offset",
)

# COMMAND ----------

writer = (
    enriched.writeStream.format("kafka_eos")
    .option("kafka.bootstrap.servers", args.bootstrap)
    .option("topic", args.sink)
    .option("consumerGroup", args.group)
    .option("checkpointLocation", args.checkpoint)  # the transactional id prefix derives from it
    .trigger(availableNow=True)
)
if args.crash_after_decision:
    # Fault injection is test scaffolding, not part of the package: a data source from tests/.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tests.harness.faults import FAULTS_FORMAT, FaultInjectingDataSource

    spark.dataSource.register(FaultInjectingDataSource)
    writer = writer.format(FAULTS_FORMAT).option("testing.failAt", "after_decision:kill-driver")
query = writer.start()
query.awaitTermination()
print(f"pipeline done: {sum(p['numInputRows'] for p in query.recentProgress)} records in {len(query.recentProgress)} batches")
spark.stop()
