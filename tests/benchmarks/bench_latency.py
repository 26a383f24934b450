"""Per-micro-batch overhead of the exactly-once sink, against Spark's own Kafka sink.

    make bench-latency                          # 2, 8, 32 and 64 partitions, 3 rounds, 12 batches each
    BENCH_PARTITIONS=8 BENCH_ROUNDS=5 make bench-latency

The same streaming query (kafka_eos source, 300 records per micro-batch, Trigger.AvailableNow)
writes with ``format("kafka_eos")`` (as is, with one task a Kafka partition, and with that and no gc freeze), with
Spark's ``format("kafka")`` and with the ceiling (a Python
sink that drops its input: what any Python data source pays per micro-batch), alternating over the
rounds on the same source topic, each run into a new sink topic with a new checkpoint. A batch's
time is Spark's ``triggerExecution`` duration; the first batch of each run (planning, Python
worker start) is left out. Each run's output is counted with an independent read_committed
consumer (the ceiling's by its commits) and must equal its input.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import uuid
from contextlib import ExitStack
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.benchmarks.ceiling import CEILING_SINK, DiscardingSink
from tests.benchmarks.common import bench_spark, bootstrap_servers, check_count, connector_jars, count_committed
from tests.benchmarks.common import produce as produce_one

ROWS_PER_BATCH = 300
BATCHES = int(os.environ.get("BENCH_BATCHES", "12"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
PARTITION_COUNTS = [int(p) for p in os.environ.get("BENCH_PARTITIONS", "2,8,32,64").split(",")]
PHASES = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")
"""Spark's parts of a micro-batch. The sink's writer creation (both calls), its tasks and its commit are all in
addBatch: queryPlanning is the same for both sinks (13 vs 13 ms)."""
UNPACKED = "kafka_eos, a task a partition"
NO_FREEZE = "kafka_eos, a task a partition, gcFreeze=false"
SYSTEMS = {"kafka_eos": "kafka_eos sink (exactly-once)", UNPACKED: "kafka_eos, minRecordsPerPartition=0",
           NO_FREEZE: "kafka_eos, also gcFreeze=false", "kafka": "Spark's Kafka sink (at-least-once)",
           CEILING_SINK: "ceiling: a Python sink dropping its input"}
VARIANTS = {UNPACKED: {"minRecordsPerPartition": "0"}, NO_FREEZE: {"minRecordsPerPartition": "0", "gcFreeze": "false"}}
"""Options of the kafka_eos source and sink that undo one improvement each: small ranges packed into shared Spark
partitions, and the workers' heap frozen at their first task (without both: the earlier plan)."""


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with ExitStack() as stack:
        bootstrap = bootstrap_servers(stack)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        jars = connector_jars()
        spark = bench_spark("bench-latency", jars, spark__sql__shuffle__partitions="2")
        spark.dataSource.register(DiscardingSink)
        records = ROWS_PER_BATCH * BATCHES
        print(f">> pyspark {spark.version}, local[2]; {BATCHES} micro-batches of {ROWS_PER_BATCH} rows per run, "
              f"{ROUNDS} alternating rounds; Spark's sink from {next(j.name for j in jars if j.name.startswith('spark-sql-kafka'))}")

        def run(system: str, source: str, partitions: int) -> list[dict[str, float]]:
            fmt, variant = ("kafka_eos", VARIANTS[system]) if system in VARIANTS else (system, {})
            sink = f"lat-out-{uuid.uuid4().hex[:8]}"
            if fmt != CEILING_SINK:
                admin.create_topics([NewTopic(sink, partitions, 1)])[sink].result(30)
            df = (
                spark.readStream.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
                .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", ROWS_PER_BATCH).options(**variant).load()
                .selectExpr("key", "value", "partition")
            )
            checkpoint = tempfile.mkdtemp(prefix="bench-latency-")
            count_file = Path(checkpoint) / "ceiling-count"
            sink_options = {"countFile": str(count_file)} if fmt == CEILING_SINK else {"kafka.bootstrap.servers": bootstrap, "topic": sink}
            if fmt == "kafka_eos":
                sink_options.update({k: v for k, v in variant.items() if k == "gcFreeze"})
            query = (
                df.writeStream.format(fmt).options(**sink_options).option("checkpointLocation", checkpoint)
                .trigger(availableNow=True).start()
            )
            query.awaitTermination()
            batches = [p for p in query.recentProgress if p.numInputRows]
            written = int(count_file.read_text()) if fmt == CEILING_SINK else count_committed(bootstrap, sink, partitions)
            check_count(fmt, written, records)
            return [{k: float(v) for k, v in p.durationMs.items()} for p in batches[1:]]

        print(f"{'partitions':>10}  {'system':<36} {'p50 ms':>8} {'p90 ms':>8}")
        for partitions in PARTITION_COUNTS:
            source = f"lat-src-{uuid.uuid4().hex[:8]}"
            admin.create_topics([NewTopic(source, partitions, 1)])[source].result(30)
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
            for i in range(records):
                produce_one(producer, source, b"v" * 100, str(i).encode(), i % partitions)
            producer.flush(60)
            durations: dict[str, list[dict[str, float]]] = {fmt: [] for fmt in SYSTEMS}
            for _ in range(ROUNDS):
                for fmt in SYSTEMS:
                    durations[fmt] += run(fmt, source, partitions)
            times = {fmt: [d["triggerExecution"] for d in batches] for fmt, batches in durations.items()}
            p50 = {fmt: statistics.median(t) for fmt, t in times.items()}
            for fmt, label in SYSTEMS.items():
                print(f"{partitions:>10}  {label:<36} {p50[fmt]:>8.0f} {percentile(times[fmt], 0.9):>8.0f}")
            print(f"{partitions:>10}  overhead of exactly-once: p50 +{p50['kafka_eos'] - p50['kafka']:.0f} ms "
                  f"(ratio {p50['kafka_eos'] / p50['kafka']:.2f}), over {len(times['kafka_eos'])} batches each; "
                  f"the ceiling's: +{p50[CEILING_SINK] - p50['kafka']:.0f} ms")
            print(f"{'':>10}  packing small ranges saves p50 {p50[UNPACKED] - p50['kafka_eos']:.0f} ms, the gc freeze "
                  f"{p50[NO_FREEZE] - p50[UNPACKED]:.0f} ms more")
            print(f"{'':>10}  where it goes (median ms of Spark's durationMs): " + ", ".join(
                f"{phase} {statistics.median(d.get(phase, 0.0) for d in durations['kafka_eos']):.0f} vs "
                f"{statistics.median(d.get(phase, 0.0) for d in durations['kafka']):.0f}" for phase in PHASES))
        spark.stop()


if __name__ == "__main__":
    main()
