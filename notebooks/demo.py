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

import atexit
import os
import signal
import sys
import tempfile
import uuid
from contextlib import ExitStack

from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient, NewTopic

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
stack = ExitStack()
# Stop the embedded broker however the demo ends (failed assertion, Ctrl-C, SIGTERM).
atexit.register(stack.close)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
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

# MAGIC %md
# MAGIC ## Exactly-once Kafka -> Spark -> Kafka, through a driver crash
# MAGIC
# MAGIC `notebooks/eos_pipeline.py` copies `orders` to `orders-processed` with `kafka_eos` on both
# MAGIC ends. The first run kills its own Spark driver (SIGKILL of the JVM) right after it committed
# MAGIC the decision of its first micro-batch and before phase 2. The restart recovers: it rolls the
# MAGIC decided batch forward, Spark replays the batch whose commit it never recorded, the coordinator
# MAGIC recognises the replay and aborts its duplicate transactions. An independent read_committed
# MAGIC consumer then counts the output.

# COMMAND ----------

import subprocess
from collections import Counter

from confluent_kafka import Consumer, IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

spark.stop()
SOURCE, SINK = f"orders-{uuid.uuid4().hex[:6]}", f"orders-processed-{uuid.uuid4().hex[:6]}"
for name in (SOURCE, SINK):
    admin.create_topics([NewTopic(name, 3, 1)])[name].result(30)
N = 3000
source_producer = transactional_producer("source")
for i in range(N):
    source_producer.produce(SOURCE, key=f"order-{i}".encode(), value=f"order {i}".encode(), partition=i % 3)
source_producer.commit_transaction(30)
print(f">> wrote {N} orders to {SOURCE} in one transaction")
CHECKPOINT = tempfile.mkdtemp(prefix="kafka-eos-demo-checkpoint-")
PIPELINE = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "eos_pipeline.py"), BOOTSTRAP, SOURCE, SINK, CHECKPOINT]


def end_offsets(topic: str, isolation: IsolationLevel) -> dict[int, int]:
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(3)}
    return {tp.partition: f.result(30).offset for tp, f in admin.list_offsets(request, isolation_level=isolation).items()}


def read_committed(topic: str) -> list[bytes]:
    """An independent read_committed consumer: everything up to the last stable offset."""
    ends = end_offsets(topic, IsolationLevel.READ_COMMITTED)
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": f"count-{uuid.uuid4().hex}", "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    values, done = [], {p for p, end in ends.items() if end == 0}
    while len(done) < len(ends):
        for message in consumer.consume(1000, 1.0):
            if message.error():
                if message.offset() >= ends[message.partition()]:
                    done.add(message.partition())
            elif message.offset() < ends[message.partition()]:
                values.append(message.value())
    consumer.close()
    return values


print(">> run 1: the pipeline kills its own driver between the decision of batch 0 and phase 2 ...")
crashed = subprocess.run(PIPELINE + ["--crash-after-decision"], capture_output=True, text=True)
print(f"   driver gone (exit code {crashed.returncode}); committed output so far: {len(read_committed(SINK))} records; "
      f"sink LSO {end_offsets(SINK, IsolationLevel.READ_COMMITTED)} < high watermark {end_offsets(SINK, IsolationLevel.READ_UNCOMMITTED)}: "
      "the decided batch's transactions are still open")
print(">> run 2: restart from the same checkpoint ...")
restarted = subprocess.run(PIPELINE, capture_output=True, text=True)
print("   " + (restarted.stdout.strip().splitlines() or ["(no output)"])[-1])
assert restarted.returncode == 0, restarted.stderr[-3000:]

out = read_committed(SINK)
counts = Counter(out)
expected = {f"processed:order {i}".encode() for i in range(N)}
duplicates = sum(n - 1 for n in counts.values() if n > 1)
lost = len(expected - set(counts))
print(f">> independent read_committed count of {SINK}: {len(out)} records, {len(counts)} distinct, "
      f"{duplicates} duplicates, {lost} lost (input: {N})")
group = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("orders-etl", [TopicPartition(SOURCE, p) for p in range(3)])])["orders-etl"].result(30)
print(f">> consumer group orders-etl committed offsets: {sorted((tp.partition, tp.offset) for tp in group.topic_partitions)} "
      f"(source ends {sorted(end_offsets(SOURCE, IsolationLevel.READ_COMMITTED).items())})")
assert duplicates == 0 and lost == 0 and len(out) == N
print(">> OK: exactly once through a driver crash.")

# COMMAND ----------

stack.close()
