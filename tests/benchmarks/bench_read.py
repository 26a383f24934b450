"""Batch read throughput: kafka_eos vs Spark's own Kafka source vs the raw librdkafka consumer.

    make bench-read                                      # embedded broker, 2,000,000 records of 100 bytes
    BENCH_RECORDS=500000 BENCH_ROUNDS=5 make bench-read

Everything is measured in one run on the same topic, read_committed. The topic is written in
transactions (one in ten aborted) so that every reader has to filter. Each reader is warmed up once,
then the readers take turns over BENCH_ROUNDS rounds (3 by default) and the medians are compared. The
Spark queries count the rows and sum ``length(value)``, so every value is read; each run's count must
equal the committed records produced, or the benchmark stops. Spark's connector is
spark-sql-kafka-0-10 from Maven Central (conf/spark-kafka-connector-pom.xml says which version and
why); the jars used are printed.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from contextlib import ExitStack

from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tests.benchmarks.common import Count, CountMismatch, PythonWorkerMemory, Run, alternate, bench_spark, bootstrap_servers, connector_jars, report
from tests.benchmarks.common import produce as produce_one

RECORDS = int(os.environ.get("BENCH_RECORDS", "2000000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
PARTITIONS = 2
VALUE = b"v" * 100
RAW, EOS, SPARK = "raw confluent-kafka consumer (1 process)", "kafka_eos  (spark.read, local[2])", "Spark kafka source (read_committed, local[2])"


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


def raw_consumer(bootstrap: str, topic: str, ends: dict[int, int]) -> Count:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}", "isolation.level": "read_committed",
                         "enable.partition.eof": True, "enable.auto.commit": False})
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
    return lambda: count


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
        lso = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}, isolation_level=IsolationLevel.READ_COMMITTED)
        ends = {tp.partition: f.result().offset for tp, f in lso.items()}

        jars = connector_jars()
        spark = bench_spark("bench-read", jars, spark__driver__memory="4g")
        print(f">> pyspark {spark.version}, local[2]; Spark's Kafka connector: {', '.join(j.name for j in jars)}")

        def spark_read(fmt: str, **extra: str) -> Run:
            def run() -> Count:
                reader = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
                for k, v in extra.items():
                    reader = reader.option(k, v)
                row = reader.load().selectExpr("count(*) AS n", "coalesce(sum(length(value)), 0) AS bytes").collect()[0]
                if row.bytes != row.n * len(VALUE):
                    raise CountMismatch(f"{fmt} read {row.bytes:,} value bytes for {row.n:,} records of {len(VALUE)} bytes")
                return lambda: row.n

            return run

        print(f">> one warm-up run each, then {ROUNDS} alternating rounds; every run must count {committed:,} records")
        with PythonWorkerMemory() as workers:
            seconds = alternate({RAW: lambda: raw_consumer(bootstrap, topic, ends), EOS: spark_read("kafka_eos"),
                                 SPARK: spark_read("kafka", **{"kafka.isolation.level": "read_committed"})}, committed, ROUNDS)
        rate = report(seconds, committed)
        print(f">> kafka_eos / Spark's Kafka source throughput ratio (medians): {rate[EOS] / rate[SPARK]:.2f}")
        print(f">> kafka_eos / raw consumer throughput ratio (medians):          {rate[EOS] / rate[RAW]:.2f}")
        print(f">> kafka_eos peak memory of one Spark Python worker: {workers.peak_mib:.0f} MiB "
              f"(for {committed // PARTITIONS:,} records of {len(VALUE)} bytes per partition: bounded by maxRecordsPerBatch, not by the partition)")
        spark.stop()


if __name__ == "__main__":
    main()
