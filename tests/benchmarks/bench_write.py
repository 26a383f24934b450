"""Streaming write throughput and the time of one commit.

    make bench-write                     # embedded broker, 1,000,000 records of 100 bytes
    BENCH_RECORDS=200000 make bench-write
    BENCH_PARTS=batch make bench-write      # only the sinks alone (batch df.write of generated rows)
    BENCH_PARTS=tasks make bench-write      # many small tasks: 200 rows each, as a shuffle's 200 partitions write,
                                            # beside Spark's sink and a Python sink that drops its input

One run measures, on the same data:
* a streaming query kafka_eos -> kafka_eos (exactly-once), Trigger.AvailableNow;
* the same query writing with Spark's own Kafka sink (format("kafka"), at-least-once);
* the same exactly-once query on the pure-Python write path (writeEngine=python; the first is the compiled one);
* a raw transactional confluent-kafka producer in one process;
* the ceiling: the same query into a Python stream sink that counts its Arrow batches and drops them;
* the median and p90 of TwoPhaseCommitCoordinator.commit for 3 prepared tasks, outside Spark.

Beside each time, the CPU seconds each process kind used (the broker, Spark's JVM, Spark's Python workers, the
benchmark's own process): the broker shares this machine's cores, so its CPU bounds every sink's figure here.

Then the sinks alone, without the Kafka source in front of them: a batch ``df.write`` of the same number of
generated rows (``spark.range``, 100-byte values) into kafka_eos on both write paths, Spark's Kafka sink and the
sink that drops its input, again alternating over BENCH_ROUNDS rounds after a warm-up.

Each system is warmed up once on a small topic, then the three take turns over BENCH_ROUNDS rounds (3 by
default), each run into a new sink topic, and the medians are compared. An independent read_committed
consumer counts every run's output, which must equal the records produced, or the benchmark stops.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.benchmarks.ceiling import CEILING_SINK, DiscardingSink
from tests.benchmarks.common import (
    Count,
    PythonWorkerMemory,
    Run,
    alternate,
    bench_spark,
    bootstrap_servers,
    connector_jars,
    count_committed,
    report,
    report_cpu,
    with_cpu,
)
from tests.benchmarks.common import produce as produce_one

RECORDS = int(os.environ.get("BENCH_RECORDS", "1000000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
PARTS = os.environ.get("BENCH_PARTS", "stream,batch").split(",")
"""Which measurements to run: the streaming query (``stream``), the sinks alone (``batch``), many small tasks
(``tasks``); the first two by default."""
TASK_COUNTS = [int(n) for n in os.environ.get("BENCH_TASKS", "8,64,256").split(",")]
"""The ``tasks`` part's task counts, one measurement each."""
ROWS_PER_TASK = 200
TASKS_TOPIC_PARTITIONS = 16
WARM_UP_RECORDS = min(RECORDS, 20_000)
PARTITIONS = 3
VALUE = b"v" * 100
EOS, SPARK, RAW = ("kafka_eos stream -> kafka_eos sink (exactly-once)", "kafka_eos stream -> Spark kafka sink (at-least-once)",
                   "raw transactional producer (1 process)")
CEILING = "ceiling: kafka_eos stream -> a sink that drops its input"
EOS_PYTHON = "kafka_eos stream -> kafka_eos sink, pure-Python write path (writeEngine=python)"
BATCH_EOS, BATCH_SPARK, BATCH_CEILING, BATCH_EOS_PYTHON = (
    "df.write -> kafka_eos sink (exactly-once)", "df.write -> Spark kafka sink (at-least-once)",
    "ceiling: df.write -> a sink that drops its input", "df.write -> kafka_eos sink, pure-Python write path")


def fill(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(records):
        produce_one(producer, topic, VALUE, str(i).encode(), i % PARTITIONS)
    producer.flush(60)


def raw_transactional(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-raw-{uuid.uuid4().hex}", "linger.ms": 5})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(records):
        produce_one(producer, topic, VALUE, str(i).encode(), i % PARTITIONS)
    producer.commit_transaction(120)


def commit_times(bootstrap: str, topic: str, rounds: int = 15) -> list[float]:
    from spark_kafka_eos._internal.config.writer import parse_writer_options
    from spark_kafka_eos._internal.decision_log.records import EpochId
    from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
    from spark_kafka_eos._internal.write.task_producer import TaskIdentity, write_task

    options = parse_writer_options(
        {"kafka.bootstrap.servers": bootstrap, "topic": topic, "transactional.id.prefix": f"bench-{uuid.uuid4().hex[:6]}"}, streaming=True
    )
    coordinator = TwoPhaseCommitCoordinator(options, 60_000)
    batch = pa.record_batch([pa.array([VALUE] * 1000, pa.binary())], names=["value"])
    times = []
    for epoch in range(rounds):
        tasks = [write_task(options, EpochId.stream("bench", epoch), [batch], task=TaskIdentity(p, 0, p), transaction_timeout_ms=60_000)
                 for p in range(PARTITIONS)]
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
        runs = iter(range(1_000_000))

        def new_topic(role: str, partitions: int = PARTITIONS) -> str:
            topic = f"bench-{role}-{tag}-{next(runs)}"
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
            return topic

        source, warm_up_source, commit_sink = new_topic("src"), new_topic("warm-up-src"), new_topic("commit")
        fill(bootstrap, source, RECORDS)
        fill(bootstrap, warm_up_source, WARM_UP_RECORDS)
        print(f">> {RECORDS:,} source records of {len(VALUE)} bytes in {source}, {PARTITIONS} partitions")

        jars = connector_jars()
        spark = bench_spark("bench-write", jars, spark__driver__memory="4g")
        print(f">> pyspark {spark.version}, local[2]; Spark's Kafka sink from {', '.join(j.name for j in jars)}")

        spark.dataSource.register(DiscardingSink)

        def stream_to(fmt: str, from_topic: str, records: int, engine: str = "auto") -> Run:
            def run() -> Count:
                sink = new_topic(fmt) if fmt != CEILING_SINK else ""
                count_file = Path(tempfile.mkdtemp(prefix="bench-ceiling-")) / "rows"
                df = (
                    spark.readStream.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("subscribe", from_topic)
                    .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", max(records // 5, 1)).load()
                    .selectExpr("key", "value", "partition")
                )
                (df.writeStream.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
                 .option("countFile", str(count_file)).option("writeEngine", engine)
                 .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-checkpoint-")).trigger(availableNow=True)
                 .start().awaitTermination())
                if fmt == CEILING_SINK:
                    return lambda: int(count_file.read_text())
                return lambda: count_committed(bootstrap, sink, PARTITIONS)

            return run

        def batch_to(fmt: str, records: int, engine: str = "auto") -> Run:
            def run() -> Count:
                sink = new_topic(fmt) if fmt != CEILING_SINK else ""
                count_file = Path(tempfile.mkdtemp(prefix="bench-ceiling-")) / "rows"
                df = spark.range(records, numPartitions=PARTITIONS).selectExpr(
                    "CAST(CAST(id AS STRING) AS BINARY) AS key", f"CAST(repeat('v', {len(VALUE)}) AS BINARY) AS value")
                (df.write.format(fmt).mode("append").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
                 .option("countFile", str(count_file)).option("writeEngine", engine)
                 .option("transactional.id.prefix", f"bench-batch-{uuid.uuid4().hex[:8]}").save())
                if fmt == CEILING_SINK:
                    return lambda: int(count_file.read_text())
                return lambda: count_committed(bootstrap, sink, PARTITIONS)

            return run

        eos_peak_mib: list[float] = []

        def measured(run: Run) -> Run:
            """``run``, sampling the Spark Python workers' memory while it runs."""
            def wrapped() -> Count:
                with PythonWorkerMemory(interval_s=0.2) as workers:
                    count = run()
                eos_peak_mib.append(workers.peak_mib)
                return count

            return wrapped

        def raw(records: int) -> Run:
            def run() -> Count:
                sink = new_topic("raw")
                raw_transactional(bootstrap, sink, records)
                return lambda: count_committed(bootstrap, sink, PARTITIONS)

            return run

        if "stream" in PARTS:
            print(f">> one warm-up run each ({WARM_UP_RECORDS:,} records), then {ROUNDS} alternating rounds; "
                  f"every run's output must count {RECORDS:,} records")
            stream_systems, stream_cpu = with_cpu(
                {EOS: measured(stream_to("kafka_eos", source, RECORDS, "native")), SPARK: stream_to("kafka", source, RECORDS), RAW: raw(RECORDS),
                 CEILING: stream_to(CEILING_SINK, source, RECORDS), EOS_PYTHON: stream_to("kafka_eos", source, RECORDS, "python")})
            seconds = alternate(
                stream_systems, RECORDS, ROUNDS,
                warm_up={EOS: stream_to("kafka_eos", warm_up_source, WARM_UP_RECORDS, "native"), SPARK: stream_to("kafka", warm_up_source, WARM_UP_RECORDS),
                         RAW: raw(WARM_UP_RECORDS), CEILING: stream_to(CEILING_SINK, warm_up_source, WARM_UP_RECORDS),
                         EOS_PYTHON: stream_to("kafka_eos", warm_up_source, WARM_UP_RECORDS, "python")},
                warm_up_expected=WARM_UP_RECORDS,
            )
            rate = report(seconds, RECORDS)
            report_cpu(stream_cpu, seconds)
            print(f">> kafka_eos sink / Spark's Kafka sink throughput ratio (medians): {rate[EOS] / rate[SPARK]:.2f}")
            print(f">> kafka_eos sink, pure-Python write path / Spark's Kafka sink ratio (medians): {rate[EOS_PYTHON] / rate[SPARK]:.2f}")
            print(f">> kafka_eos sink / raw transactional producer ratio (medians):    {rate[EOS] / rate[RAW]:.2f}")
            print(f">> ceiling (same query, a sink that drops its input) / Spark's Kafka sink throughput ratio (medians): {rate[CEILING] / rate[SPARK]:.2f}")
            print(f">> kafka_eos peak memory of one Spark Python worker (kafka_eos source and sink): {max(eos_peak_mib):.0f} MiB "
                  f"(for {RECORDS // PARTITIONS:,} records per partition)")
        if "batch" in PARTS:
            print(f">> the sinks alone: batch df.write of {RECORDS:,} generated rows, {PARTITIONS} partitions; "
                  f"one warm-up run each, then {ROUNDS} alternating rounds")
            batch_systems, batch_cpu = with_cpu(
                {BATCH_EOS: batch_to("kafka_eos", RECORDS, "native"), BATCH_SPARK: batch_to("kafka", RECORDS), BATCH_CEILING: batch_to(CEILING_SINK, RECORDS),
                 BATCH_EOS_PYTHON: batch_to("kafka_eos", RECORDS, "python")})
            batch_seconds = alternate(
                batch_systems, RECORDS, ROUNDS,
                warm_up={label: run for label, run in (
                    (BATCH_EOS, batch_to("kafka_eos", WARM_UP_RECORDS, "native")), (BATCH_SPARK, batch_to("kafka", WARM_UP_RECORDS)),
                    (BATCH_CEILING, batch_to(CEILING_SINK, WARM_UP_RECORDS)), (BATCH_EOS_PYTHON, batch_to("kafka_eos", WARM_UP_RECORDS, "python")))},
                warm_up_expected=WARM_UP_RECORDS,
            )
            batch_rate = report(batch_seconds, RECORDS)
            report_cpu(batch_cpu, batch_seconds)
            print(f">> batch df.write: kafka_eos sink / Spark's Kafka sink throughput ratio (medians): {batch_rate[BATCH_EOS] / batch_rate[BATCH_SPARK]:.2f}")
            print(f">> batch df.write: kafka_eos sink, pure-Python write path / Spark's Kafka sink ratio (medians): "
                  f"{batch_rate[BATCH_EOS_PYTHON] / batch_rate[BATCH_SPARK]:.2f}")
            print(f">> batch df.write: ceiling (a sink that drops its input) / Spark's Kafka sink ratio (medians): "
                  f"{batch_rate[BATCH_CEILING] / batch_rate[BATCH_SPARK]:.2f}")
        if "tasks" in PARTS:
            print(f">> many small tasks: batch df.write of {ROWS_PER_TASK} rows a task into a {TASKS_TOPIC_PARTITIONS}-partition "
                  f"topic, a new transactional.id.prefix each run (a backfill's first job); {ROUNDS} alternating rounds")

            def tasks_to(fmt: str, tasks: int) -> Run:
                # One sink topic per system, made before its runs: Spark's Java producer timed out (120 s) on topics
                # made right before its write. Each run counts what it added.
                sink = new_topic(f"tasks-{fmt}", TASKS_TOPIC_PARTITIONS) if fmt != CEILING_SINK else ""
                time.sleep(2)

                def run() -> Count:
                    before = count_committed(bootstrap, sink, TASKS_TOPIC_PARTITIONS) if sink else 0
                    count_file = Path(tempfile.mkdtemp(prefix="bench-ceiling-")) / "rows"
                    df = spark.range(0, tasks * ROWS_PER_TASK, 1, tasks).selectExpr("CAST(id AS STRING) AS value")
                    (df.write.format(fmt).mode("append").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
                     .option("countFile", str(count_file))
                     .option("transactional.id.prefix", f"bench-tasks-{uuid.uuid4().hex[:8]}").save())
                    if fmt == CEILING_SINK:
                        return lambda: int(count_file.read_text())
                    return lambda: count_committed(bootstrap, sink, TASKS_TOPIC_PARTITIONS) - before

                return run

            for tasks in TASK_COUNTS:
                plain = {BATCH_EOS: tasks_to("kafka_eos", tasks), BATCH_SPARK: tasks_to("kafka", tasks),
                         BATCH_CEILING: tasks_to(CEILING_SINK, tasks)}
                task_systems, task_cpu = with_cpu(plain)  # the warm-up runs unmeasured
                task_seconds = alternate(task_systems, tasks * ROWS_PER_TASK, ROUNDS, warm_up=plain,
                                         warm_up_expected=tasks * ROWS_PER_TASK)
                report_cpu(task_cpu, task_seconds)
                eos, sparks, ceiling = (statistics.median(task_seconds[system]) for system in (BATCH_EOS, BATCH_SPARK, BATCH_CEILING))
                print(f">> {tasks} tasks of {ROWS_PER_TASK} rows: kafka_eos {eos:.2f} s, Spark's Kafka sink {sparks:.2f} s, "
                      f"a Python sink that drops its input {ceiling:.2f} s (medians): {eos / sparks:.2f}x Spark's time "
                      f"({(eos - sparks) / tasks * 1000:.1f} ms more a task), {eos / ceiling:.2f}x the Python sink's "
                      f"({(eos - ceiling) / tasks * 1000:.1f} ms more a task); the Python sink is {ceiling / sparks:.2f}x Spark's")
        spark.stop()
        times = commit_times(bootstrap, commit_sink)
        print(f">> one commit (3 participants, decision + phase 2 + completion), {len(times)} commits: "
              f"median {statistics.median(times) * 1000:.0f} ms, p90 {sorted(times)[int(len(times) * 0.9) - 1] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
