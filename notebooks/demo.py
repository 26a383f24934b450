"""The local demo (`make demo`): an embedded Kafka broker and a local Spark run the notebooks.

1. `notebooks/read_committed.py`: committed, aborted and open transactions, read with kafka_eos.
2. `notebooks/eos_pipeline.py`, twice: the first run's driver is killed (SIGKILL of its JVM) right
   after the decision of its first micro-batch and before phase 2; the restart recovers. An
   independent read_committed consumer then counts the output.

Both notebooks are Databricks source notebooks; `tests/harness/notebook_runner.py` gives them a
local `spark` and a `dbutils` stand-in here.
"""

import atexit
import gc
import os
import signal
import sys
import tempfile
import uuid
from contextlib import ExitStack

from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient, NewTopic

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PROJECT)  # the notebook runner lives in tests/harness
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
stack = ExitStack()
# Stop the embedded broker however the demo ends (failed assertion, Ctrl-C, SIGTERM).
atexit.register(stack.close)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
BOOTSTRAP = os.environ.get("KAFKA_EOS_BOOTSTRAP_SERVERS")
if not BOOTSTRAP:
    from tests.harness.local_kafka import LocalKafka

    print(">> starting an embedded Kafka broker on loopback ...")
    broker = stack.enter_context(LocalKafka(tempfile.mkdtemp(prefix="kafka-eos-demo-")))
    BOOTSTRAP = broker.bootstrap_servers
print(f">> Kafka at {BOOTSTRAP}")

from tests.harness.notebook_runner import local_spark, run_notebook  # noqa: E402

print(">> notebooks/read_committed.py")
spark = local_spark("kafka_eos demo")
run_notebook(os.path.join(PROJECT, "notebooks", "read_committed.py"), spark, {"bootstrap_servers": BOOTSTRAP})
spark.stop()
admin = AdminClient({"bootstrap.servers": BOOTSTRAP})


def transactional_producer(name: str) -> Producer:
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "transactional.id": f"demo-{name}-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    return producer


import subprocess
from collections import Counter

from confluent_kafka import Consumer, IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

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
PIPELINE = [sys.executable, "-m", "tests.harness.notebook_runner", os.path.join(PROJECT, "notebooks", "eos_pipeline.py")] + [
    arg for widget in (f"bootstrap_servers={BOOTSTRAP}", f"source={SOURCE}", f"sink={SINK}", f"checkpoint={CHECKPOINT}")
    for arg in ("--widget", widget)
]


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
crashed = subprocess.run(PIPELINE + ["--fail-at", "after_decision:kill-driver"], capture_output=True, text=True, cwd=PROJECT)
print(f"   driver gone (exit code {crashed.returncode}); committed output so far: {len(read_committed(SINK))} records; "
      f"sink LSO {end_offsets(SINK, IsolationLevel.READ_COMMITTED)} < high watermark {end_offsets(SINK, IsolationLevel.READ_UNCOMMITTED)}: "
      "the decided batch's transactions are still open")
print(">> run 2: restart from the same checkpoint ...")
restarted = subprocess.run(PIPELINE, capture_output=True, text=True, cwd=PROJECT)
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

# Let the clients go before the broker does: a client that outlives its broker logs "Connection refused".
del admin, source_producer
gc.collect()
stack.close()
