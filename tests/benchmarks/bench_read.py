"""Batch read throughput: kafka_eos (compiled and pure-Python paths) vs Spark's own Kafka source vs the raw
librdkafka consumer, and the ceiling: a Python source that yields pre-built Arrow batches.

    make bench-read                                      # embedded broker, 2M and 4M records of 100 bytes
    BENCH_RECORDS=500000 BENCH_ROUNDS=5 make bench-read  # one size (a comma-separated list for several)

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
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tests.benchmarks.ceiling import CEILING_SOURCE, ArrowCeilingSource
from tests.benchmarks.common import Count, CountMismatch, Run, alternate, bench_spark, bootstrap_servers, connector_jars, report
from tests.benchmarks.common import produce as produce_one

SIZES = [int(n) for n in os.environ.get("BENCH_RECORDS", "2000000,4000000").split(",")]
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
PARTITIONS = 2
VALUE = b"v" * 100
RAW = "raw confluent-kafka consumer (1 process)"
EOS = "kafka_eos, compiled path (readEngine=native)"
EOS_PYTHON = "kafka_eos, pure-Python path (readEngine=python)"
SPARK = "Spark kafka source (read_committed, local[2])"
CEILING = "ceiling: Python source of pre-built Arrow batches"


def produce(bootstrap: str, topic: str, records: int) -> int:
    """Write ``records`` committed records in transactions of 10,000, plus aborted ones."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex}", "linger.ms": 20})
    producer.init_transactions(30)
    committed, txn = 0, 0
    while committed < records:
        producer.begin_transaction()
        n = min(10_000, records - committed)
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
        jars = connector_jars()
        spark = bench_spark("bench-read", jars, spark__driver__memory="4g")
        spark.dataSource.register(ArrowCeilingSource)
        print(f">> pyspark {spark.version}, local[2]; Spark's Kafka connector: {', '.join(j.name for j in jars)}")
        for records in SIZES:
            bench_size(spark, bootstrap, records)
        spark.stop()


def bench_size(spark: Any, bootstrap: str, records: int) -> None:
    topic = f"bench-read-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    t0 = time.perf_counter()
    committed = produce(bootstrap, topic, records)
    print(f">> wrote {committed:,} committed records (+ aborted) of {len(VALUE)} bytes in {time.perf_counter() - t0:.1f} s to {topic}")
    time.sleep(2)  # let the last markers land
    lso = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}, isolation_level=IsolationLevel.READ_COMMITTED)
    ends = {tp.partition: f.result().offset for tp, f in lso.items()}

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
    seconds = alternate({
        RAW: lambda: raw_consumer(bootstrap, topic, ends),
        EOS: spark_read("kafka_eos", readEngine="native"),
        EOS_PYTHON: spark_read("kafka_eos", readEngine="python"),
        SPARK: spark_read("kafka", **{"kafka.isolation.level": "read_committed"}),
        CEILING: spark_read(CEILING_SOURCE, rows=str(committed), partitions=str(PARTITIONS), valueBytes=str(len(VALUE))),
    }, committed, ROUNDS)
    rate = report(seconds, committed)
    for label in (EOS, EOS_PYTHON, CEILING):
        print(f">> {committed:,} records: {label} / Spark's Kafka source throughput ratio (medians): {rate[label] / rate[SPARK]:.2f}")
    print(f">> {committed:,} records: kafka_eos compiled path / raw consumer throughput ratio (medians): {rate[EOS] / rate[RAW]:.2f}")
    print(f">> {committed:,} records: kafka_eos compiled path / ceiling (medians): {rate[EOS] / rate[CEILING]:.2f}")


if __name__ == "__main__":
    main()
