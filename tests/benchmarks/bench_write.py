"""Streaming write throughput and the time of one commit.

    make bench-write                     # embedded broker, 1,000,000 records of 100 bytes
    BENCH_RECORDS=200000 make bench-write

One run measures, on the same data:
* a streaming query kafka_eos -> kafka_eos (exactly-once), Trigger.AvailableNow;
* the same query writing with Spark's own Kafka sink (format("kafka"), at-least-once);
* a raw transactional confluent-kafka producer in one process;
* the median and p90 of TwoPhaseCommitCoordinator.commit for 3 prepared tasks, outside Spark.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.benchmarks.common import bench_spark, bootstrap_servers, connector_jars
from tests.benchmarks.common import produce as produce_one

RECORDS = int(os.environ.get("BENCH_RECORDS", "1000000"))
PARTITIONS = 3
VALUE = b"v" * 100


def fill(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(RECORDS):
        produce_one(producer, topic, VALUE, str(i).encode(), i % PARTITIONS)
    producer.flush(60)


def raw_transactional(bootstrap: str, topic: str) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-raw-{uuid.uuid4().hex}", "linger.ms": 5})
    producer.init_transactions(30)
    start = time.perf_counter()
    producer.begin_transaction()
    for i in range(RECORDS):
        produce_one(producer, topic, VALUE, str(i).encode(), i % PARTITIONS)
    producer.commit_transaction(120)
    return time.perf_counter() - start


def commit_times(bootstrap: str, topic: str, rounds: int = 15) -> list[float]:
    from spark_kafka_eos.write.coordinator import TwoPhaseCommitCoordinator
    from spark_kafka_eos.write.log_record import EpochId
    from spark_kafka_eos.write.task_producer import TaskIdentity, write_task
    from spark_kafka_eos.write.writer_options import parse_writer_options

    options = parse_writer_options(
        {"kafka.bootstrap.servers": bootstrap, "topic": topic, "transactional.id.prefix": f"bench-{uuid.uuid4().hex[:6]}"}, streaming=True
    )
    coordinator = TwoPhaseCommitCoordinator(options, 60_000)
    batch = pa.record_batch([pa.array([VALUE] * 1000, pa.binary())], names=["value"])
    times = []
    for epoch in range(rounds):
        tasks = [write_task(options, EpochId.stream("bench", epoch), [batch], task=TaskIdentity(p, 0, p), transaction_timeout_ms=60_000) for p in range(PARTITIONS)]
        start = time.perf_counter()
        coordinator.commit(EpochId.stream("bench", epoch), tasks)
        times.append(time.perf_counter() - start)
    return times[1:]  # the first one creates the decision-log topic


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with ExitStack() as stack:
        bootstrap = bootstrap_servers(stack)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        tag = uuid.uuid4().hex[:6]
        source, eos_sink, spark_sink, raw_sink, commit_sink = (f"bench-{n}-{tag}" for n in ("src", "eos", "spark", "raw", "commit"))
        for topic in (source, eos_sink, spark_sink, raw_sink, commit_sink):
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
        fill(bootstrap, source)
        print(f">> {RECORDS:,} source records of {len(VALUE)} bytes in {source}, {PARTITIONS} partitions")

        jars = connector_jars()
        spark = bench_spark("bench-write", jars, spark__driver__memory="4g")
        print(f">> pyspark {spark.version}, local[2]; Spark's Kafka sink from {', '.join(j.name for j in jars)}")

        def stream_to(fmt: str, sink: str, **options: str) -> float:
            df = (
                spark.readStream.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
                .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", max(RECORDS // 5, 1)).load()
                .selectExpr("key", "value", "partition")
            )
            writer = (
                df.writeStream.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
                .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-checkpoint-")).trigger(availableNow=True)
            )
            for name, value in options.items():
                writer = writer.option(name, value)
            start = time.perf_counter()
            writer.start().awaitTermination()
            return time.perf_counter() - start

        results = {
            "kafka_eos stream -> kafka_eos sink (exactly-once)": stream_to("kafka_eos", eos_sink),
            "kafka_eos stream -> Spark kafka sink (at-least-once)": stream_to("kafka", spark_sink),
            "raw transactional producer (1 process)": raw_transactional(bootstrap, raw_sink),
        }
        for label, seconds in results.items():
            print(f"   {label:<54} {RECORDS:>10,} rows  {seconds:7.2f} s  {RECORDS / seconds:>10,.0f} rows/s")
        eos, spark_sink_s, raw = results.values()
        print(f">> kafka_eos sink / Spark's Kafka sink throughput ratio: {spark_sink_s / eos:.2f}")
        print(f">> kafka_eos sink / raw transactional producer ratio:    {raw / eos:.2f}")
        spark.stop()
        times = commit_times(bootstrap, commit_sink)
        print(f">> one commit (3 participants, decision + phase 2 + completion), {len(times)} commits: "
              f"median {statistics.median(times) * 1000:.0f} ms, p90 {sorted(times)[int(len(times) * 0.9) - 1] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
