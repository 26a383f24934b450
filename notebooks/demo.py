# Databricks notebook source
# MAGIC %md
# MAGIC # kafka_eos demo: read_committed Kafka in Spark
# MAGIC
# MAGIC Run locally with `make demo` (it starts an embedded Kafka broker and a local Spark), or in a
# MAGIC notebook after `pip install spark-kafka-eos` with `BOOTSTRAP` pointing at your cluster.
# MAGIC
# MAGIC The demo writes a topic with committed, aborted and still-open transactions mixed with plain
# MAGIC records, then reads it with `format("kafka_eos")`: only committed records come back, and
# MAGIC nothing past the open transaction (the last stable offset).

# COMMAND ----------

import os
import sys
import tempfile
import uuid
from contextlib import ExitStack

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
stack = ExitStack()
BOOTSTRAP = os.environ.get("KAFKA_EOS_BOOTSTRAP_SERVERS")
if not BOOTSTRAP:
    from spark_kafka_eos.local_kafka import LocalKafka

    print(">> starting an embedded Kafka broker on loopback ...")
    broker = stack.enter_context(LocalKafka(tempfile.mkdtemp(prefix="kafka-eos-demo-")))
    BOOTSTRAP = broker.bootstrap_servers
print(f">> Kafka at {BOOTSTRAP}")

# COMMAND ----------

TOPIC = f"demo-orders-{uuid.uuid4().hex[:6]}"
admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)


def transactional_producer(name: str) -> Producer:
    # A long transaction timeout: the coordinator would abort the "open" one after librdkafka's 60 s.
    producer = Producer(
        {"bootstrap.servers": BOOTSTRAP, "transactional.id": f"demo-{name}-{uuid.uuid4().hex[:6]}", "transaction.timeout.ms": 600_000}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    return producer


plain = Producer({"bootstrap.servers": BOOTSTRAP})
committed, aborted, still_open = transactional_producer("committed"), transactional_producer("aborted"), transactional_producer("open")
for i in range(3):
    for partition in (0, 1):
        committed.produce(TOPIC, key=b"order", value=f"committed {i}".encode(), partition=partition)
        aborted.produce(TOPIC, key=b"order", value=f"ABORTED {i}".encode(), partition=partition)
        plain.produce(TOPIC, value=f"plain {i}".encode(), partition=partition)
        for producer in (committed, aborted, plain):
            producer.flush(30)
still_open.produce(TOPIC, value=b"UNDECIDED (open transaction)", partition=0)
still_open.flush(30)
plain.produce(TOPIC, value=b"plain, written after the open transaction", partition=0)
plain.produce(TOPIC, value=b"plain 3", partition=1)
plain.flush(30)
committed.commit_transaction(30)
aborted.abort_transaction(30)
print(">> wrote 6 committed, 6 aborted, 1 undecided and 8 plain records")

# COMMAND ----------

from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local[2]").appName("kafka_eos demo").config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")


def read(isolation: str = "read_committed"):
    return (
        spark.read.format("kafka_eos")  # registered automatically by `pip install`
        .option("kafka.bootstrap.servers", BOOTSTRAP)
        .option("subscribe", TOPIC)
        .option("kafka.isolation.level", isolation)
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .orderBy("partition", "offset")
    )


import time

deadline = time.monotonic() + 30
while read().count() < 10 and time.monotonic() < deadline:
    time.sleep(0.2)  # the commit markers land just after commit_transaction returns

print(">> what a read_uncommitted reader would see (aborted and undecided records included):")
read("read_uncommitted").show(30, truncate=False)
print(">> kafka_eos (read_committed, bounded by the last stable offset):")
committed_view = read()
committed_view.show(30, truncate=False)

# COMMAND ----------

values = [r.value for r in committed_view.collect()]
assert not any("ABORTED" in v or "UNDECIDED" in v for v in values), values
assert "plain, written after the open transaction" not in values, "read past the last stable offset"
assert sum(v.startswith("committed") for v in values) == 6
print(f">> OK: {len(values)} records, only committed ones; partition 0 stops at the open transaction.")

still_open.commit_transaction(30)
deadline = time.monotonic() + 30
while read().count() < 12 and time.monotonic() < deadline:
    time.sleep(0.2)
print(">> after the open transaction commits, the held-back records appear:")
read().where("partition = 0").show(30, truncate=False)

# COMMAND ----------

spark.stop()
stack.close()
