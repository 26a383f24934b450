# Databricks notebook source
# MAGIC %md
# MAGIC # kafka_eos: read_committed Kafka in Spark
# MAGIC
# MAGIC Writes a topic with committed, aborted and still-open transactions mixed with plain records,
# MAGIC then reads it with `format("kafka_eos")`: only committed records come back, and nothing past
# MAGIC the open transaction (the last stable offset) until it commits.

# COMMAND ----------

# MAGIC %pip install spark-kafka-eos

# COMMAND ----------

import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

dbutils.widgets.text("bootstrap_servers", "localhost:9092", "Kafka bootstrap servers")
dbutils.widgets.text("topic", "", "Demo topic (empty: a new one)")
BOOTSTRAP = dbutils.widgets.get("bootstrap_servers")
TOPIC = dbutils.widgets.get("topic") or f"kafka-eos-demo-{uuid.uuid4().hex[:6]}"
admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
admin.create_topics([NewTopic(TOPIC, 2)])[TOPIC].result(30)


def transactional_producer(name: str) -> Producer:
    # A long transaction timeout: the coordinator would abort the "open" one after librdkafka's 60 s.
    producer = Producer({
        "bootstrap.servers": BOOTSTRAP, "transactional.id": f"demo-{name}-{uuid.uuid4().hex[:6]}",
        "transaction.timeout.ms": 600_000,
    })
    producer.init_transactions(30)
    producer.begin_transaction()
    return producer


plain = Producer({"bootstrap.servers": BOOTSTRAP})
committed, aborted, still_open = (transactional_producer(n) for n in ("committed", "aborted", "open"))
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
print(f"wrote 6 committed, 6 aborted, 1 undecided and 8 plain records to {TOPIC}")

# COMMAND ----------


def read(isolation: str = "read_committed"):
    return (
        spark.read.format("kafka_eos")  # registered by `pip install`, no register call
        .option("kafka.bootstrap.servers", BOOTSTRAP)
        .option("subscribe", TOPIC)
        .option("kafka.isolation.level", isolation)
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .orderBy("partition", "offset")
    )


def wait_for(count: int) -> None:
    """The commit markers land just after commit_transaction returns."""
    deadline = time.monotonic() + 30
    while read().count() < count and time.monotonic() < deadline:
        time.sleep(0.2)


wait_for(13)  # 6 committed, 7 plain; not the plain record behind the open transaction
print("What a read_uncommitted reader sees (aborted and undecided records included):")
display(read("read_uncommitted"))
print("kafka_eos (read_committed, bounded by the last stable offset):")
committed_view = read()
display(committed_view)

# COMMAND ----------

values = [r.value for r in committed_view.collect()]
assert not any("ABORTED" in v or "UNDECIDED" in v for v in values), values
assert "plain, written after the open transaction" not in values, "read past the last stable offset"
assert sum(v.startswith("committed") for v in values) == 6 and len(values) == 13, values
print(f"OK: {len(values)} records, only committed ones; partition 0 stops at the open transaction.")

still_open.commit_transaction(30)
wait_for(15)
print("After the open transaction commits, the held-back records appear:")
display(read().where("partition = 0"))
assert len(read().collect()) == 15

# COMMAND ----------

# MAGIC %md
# MAGIC ## Schema Registry values
# MAGIC
# MAGIC Confluent's serializers prefix each value with a magic byte and a 4-byte schema id (or, with Schema
# MAGIC Registry 8.0's header-based ids, put the schema's GUID in a `__value_schema_id` header: pass the
# MAGIC `headers` column too, read with `includeHeaders`; `protobuf=True` strips Protobuf's message indexes).
# MAGIC `wire_format` splits them off, so that `from_avro`, `from_protobuf` or `from_json` can decode
# MAGIC the payload. Here, two JSON values as Confluent's JSON serializer writes them (schema id 7).

# COMMAND ----------

import json
import struct

from pyspark.sql import functions as F

from spark_kafka_eos.schema_registry import wire_format

for order in ({"id": 1, "item": "book"}, {"id": 2, "item": "pen"}):
    plain.produce(TOPIC, value=b"\x00" + struct.pack(">I", 7) + json.dumps(order).encode(), partition=1)
plain.flush(30)
orders = (
    spark.read.format("kafka_eos").option("kafka.bootstrap.servers", BOOTSTRAP).option("subscribe", TOPIC).load()
    .select(wire_format("value").alias("v"))
    .where("v.schema_id = 7")
    .select("v.schema_id", F.from_json(F.col("v.payload").cast("string"), "id INT, item STRING").alias("order"))
)
display(orders)
assert sorted(r.order.item for r in orders.collect()) == ["book", "pen"]

