# Databricks notebook source
# MAGIC %md
# MAGIC # Exactly-once Kafka -> Spark -> Kafka
# MAGIC
# MAGIC Reads `source` read_committed, transforms, and writes `sink` exactly once with `kafka_eos` on
# MAGIC both ends. Every micro-batch is one two-phase commit coordinated by the driver, and the
# MAGIC consumed offsets are committed to `consumer_group` inside the same decision. The trigger is
# MAGIC `availableNow` (the only one serverless allows): each run processes what is there and stops;
# MAGIC schedule it as a job, or run it again, and it resumes from its checkpoint.

# COMMAND ----------

# MAGIC %pip install spark-kafka-eos

# COMMAND ----------

import json

dbutils.widgets.text("bootstrap_servers", "localhost:9092", "Kafka bootstrap servers")
dbutils.widgets.text("source", "orders", "Source topic")
dbutils.widgets.text("sink", "orders-processed", "Sink topic")
dbutils.widgets.text("checkpoint", "/tmp/kafka-eos/orders-etl/checkpoint", "Checkpoint location")
dbutils.widgets.text("consumer_group", "orders-etl", "Consumer group committed with each decision")
dbutils.widgets.text("max_offsets_per_trigger", "1000", "Records per micro-batch (at most)")
dbutils.widgets.text("kafka_options", "{}", "More options for both ends, as JSON (e.g. kafka.security.protocol)")
dbutils.widgets.text("sink_format", "kafka_eos", "Sink format")

BOOTSTRAP = dbutils.widgets.get("bootstrap_servers")
SOURCE, SINK = dbutils.widgets.get("source"), dbutils.widgets.get("sink")
CHECKPOINT, GROUP = dbutils.widgets.get("checkpoint"), dbutils.widgets.get("consumer_group")
KAFKA_OPTIONS = {"kafka.bootstrap.servers": BOOTSTRAP, **json.loads(dbutils.widgets.get("kafka_options"))}

# COMMAND ----------

orders = (
    spark.readStream.format("kafka_eos")  # registered by `pip install`, no register call
    .options(**KAFKA_OPTIONS)
    .option("subscribe", SOURCE)
    .option("startingOffsets", "earliest")
    .option("maxOffsetsPerTrigger", dbutils.widgets.get("max_offsets_per_trigger"))
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

query = (
    enriched.writeStream.format(dbutils.widgets.get("sink_format"))
    .options(**KAFKA_OPTIONS)
    .option("topic", SINK)
    .option("consumerGroup", GROUP)
    .option("checkpointLocation", CHECKPOINT)  # the transactional id prefix derives from it
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
processed = sum(p.numInputRows for p in query.recentProgress)
print(f"pipeline done: {processed} records in {len(query.recentProgress)} micro-batches")
