# Databricks notebook source
# MAGIC %md
# MAGIC # Exactly-once Kafka backfill, as a batch job
# MAGIC
# MAGIC Copies what `source` holds past `consumer_group`'s committed offsets to `sink`, in one
# MAGIC `df.write` job: all of it appears at once or nothing does, and the group's offsets move in the
# MAGIC same transaction. `write_id` names the run (e.g. the date an orchestrator runs it for): a retry
# MAGIC of a run with the same `write_id`, after any failure, writes nothing twice and finishes what the
# MAGIC failed attempt had decided. The next run (a new `write_id`) starts where this one stopped.

# COMMAND ----------

# MAGIC %pip install spark-kafka-eos

# COMMAND ----------

import json

dbutils.widgets.text("bootstrap_servers", "localhost:9092", "Kafka bootstrap servers")
dbutils.widgets.text("source", "orders", "Source topic")
dbutils.widgets.text("sink", "orders-backfilled", "Sink topic")
dbutils.widgets.text("consumer_group", "orders-backfill", "Consumer group: where the last run stopped")
dbutils.widgets.text("prefix", "orders-backfill", "Transactional id prefix of this job")
dbutils.widgets.text("write_id", "2026-11-22", "This run's id: a retry with the same id writes nothing twice")
dbutils.widgets.text("kafka_options", "{}", "More options for both ends, as JSON (e.g. kafka.security.protocol)")
dbutils.widgets.text("sink_format", "kafka_eos", "Sink format")

GROUP = dbutils.widgets.get("consumer_group")
KAFKA_OPTIONS = {"kafka.bootstrap.servers": dbutils.widgets.get("bootstrap_servers"), **json.loads(dbutils.widgets.get("kafka_options"))}

# COMMAND ----------

backlog = (
    spark.read.format("kafka_eos")
    .options(**KAFKA_OPTIONS)
    .option("subscribe", dbutils.widgets.get("source"))
    .option("startingOffsets", "group")  # the group's committed offsets; earliest where it has none
    .option("consumerGroup", GROUP)
    .load()
    .selectExpr(
        "key", "CONCAT('backfilled:', CAST(value AS STRING)) AS value", "partition",
        "topic AS source_topic", "partition AS source_partition", "offset AS source_offset",
    )
)

# COMMAND ----------

(
    backlog.write.format(dbutils.widgets.get("sink_format"))
    .options(**KAFKA_OPTIONS)
    .option("topic", dbutils.widgets.get("sink"))
    .option("transactional.id.prefix", dbutils.widgets.get("prefix"))
    .option("writeId", dbutils.widgets.get("write_id"))
    .option("consumerGroup", GROUP)
    .mode("append")
    .save()
)
print("backfill done")
