"""Batch read throughput: kafka_eos vs Spark's own Kafka source vs the raw librdkafka consumer.

    make bench-read                      # embedded broker, 2,000,000 records of 100 bytes
    BENCH_RECORDS=500000 make bench-read

Everything is measured in one run on the same topic, read_committed. The topic is written in
transactions (one in ten aborted) so that every reader has to filter. Spark's connector is
spark-sql-kafka-0-10 from Maven Central (conf/spark-kafka-connector-pom.xml says which version and
why); the jars used are printed.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from contextlib import ExitStack
from typing import Callable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.benchmarks.common import PythonWorkerMemory, bench_spark, bootstrap_servers, connector_jars
from tests.benchmarks.common import produce as produce_one

RECORDS = int(os.environ.get("BENCH_RECORDS", "2000000"))
PARTITIONS = 2
VALUE = b"v" * 100
def produce(bootstrap: str, topic: str) -> int:
    """Write RECORDS committed records in transactions of 10,000, plus aborted ones."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex}", "linger.ms": 20})
    producer.init_transactions(30)
    committed, txn = 0, 0
    while committed < RECORDS:
        producer.begin_transaction()
        n = min(10_000, RECORDS - committed)
        for i in range(n):
            produce_one(producer, topic, VALUE, str(i).encode(), i % PARTITIONS)
        # Flush first: aborting with records in flight is fatal (INVALID_TXN_STATE) with
        # librdkafka 2.16 against Kafka 4.3.
        producer.flush(60)
        if txn % 10 == 9:
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
            committed += n
        txn += 1
    return committed


def raw_consumer(bootstrap: str, topic: str, ends: dict[int, int]) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}", "isolation.level": "read_committed", "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    count, done = 0, set()
    while len(done) < len(ends):
        for m in consumer.consume(10_000, 0.5):
            if m.error():
                if m.offset() >= ends[m.partition()]:
                    done.add(m.partition())
                continue
            count += 1
            _ = (m.key(), m.value(), m.offset(), m.timestamp())
    consumer.close()
    return count


def timed(label: str, run: Callable[[], int]) -> tuple[str, float, int]:
    best, rows = float("inf"), 0
    for _ in range(2):
        start = time.perf_counter()
        rows = run()
        best = min(best, time.perf_counter() - start)
    print(f"   {label:<46} {rows:>10,} rows  {best:7.2f} s  {rows / best:>12,.0f} rows/s", flush=True)
    return label, best, rows


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with ExitStack() as stack:
        bootstrap = bootstrap_servers(stack)
        topic = f"bench-read-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
        t0 = time.perf_counter()
        committed = produce(bootstrap, topic)
        print(f">> wrote {committed:,} committed records (+ aborted) of {len(VALUE)} bytes in {time.perf_counter() - t0:.1f} s to {topic}")
        time.sleep(2)  # let the last markers land

        from confluent_kafka import IsolationLevel
        from confluent_kafka.admin import OffsetSpec

        lso = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}, isolation_level=IsolationLevel.READ_COMMITTED)
        ends = {tp.partition: f.result().offset for tp, f in lso.items()}

        jars = connector_jars()
        spark = bench_spark("bench-read", jars, spark__driver__memory="4g")
        print(f">> pyspark {spark.version}, local[2]; Spark's Kafka connector: {', '.join(j.name for j in jars)}")

        def spark_read(fmt: str, **extra: str) -> Callable[[], int]:
            def run() -> int:
                reader = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                for k, v in extra.items():
                    reader = reader.option(k, v)
                df = reader.load()
                df.write.format("noop").mode("overwrite").save()
                return committed

            return run

        with PythonWorkerMemory() as workers:
            eos_result = timed("kafka_eos  (spark.read, local[2])", spark_read("kafka_eos"))
        results = [
            timed("raw confluent-kafka consumer (1 process)", lambda: raw_consumer(bootstrap, topic, ends)),
            eos_result,
            timed("Spark kafka source (read_committed, local[2])", spark_read("kafka", **{"kafka.isolation.level": "read_committed"})),
        ]
        raw, eos, builtin = (r[1] for r in results)
        print(f">> kafka_eos / Spark's Kafka source throughput ratio: {builtin / eos:.2f}")
        print(f">> kafka_eos / raw consumer throughput ratio:          {raw / eos:.2f}")
        print(f">> kafka_eos peak memory of one Spark Python worker: {workers.peak_mib:.0f} MiB "
              f"(for {committed:,} records of {len(VALUE)} bytes: bounded by maxRecordsPerBatch, not by the partition)")
        spark.stop()


if __name__ == "__main__":
    main()
