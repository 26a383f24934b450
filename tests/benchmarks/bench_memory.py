"""Peak memory of a Spark Python worker against the records in one partition, reading and writing.

    make bench-memory                              # 1,000,000 and 4,000,000 records in one partition
    BENCH_SIZES=1000000,2000000 make bench-memory
    BENCH_SIZES= make bench-memory                 # only the many small tasks

For each size, one source topic with a single partition: a batch ``spark.read.format("kafka_eos")`` of
all of it (one task reads the whole partition), once on each read path (``readEngine``), then ``readStream`` ->
``writeStream.format("kafka_eos")`` of all of it in one micro-batch (one task reads and writes the whole partition),
once on each write path (``writeEngine``). The Python workers'
RSS is sampled throughout; every count is checked against what was produced.

Then many small tasks: a stream over a 64-partition topic, one record a partition a micro-batch (64 tasks each),
run first for ``BENCH_WARM_BATCHES`` micro-batches, then for ``BENCH_LONG_BATCHES`` more on the same checkpoint and
the same Python workers, with option ``gcFreeze`` on and off: the workers' peak RSS of the first run against the
second's shows whether the frozen heap (objects alive at a worker's first task) holds on to memory task after task.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from contextlib import ExitStack

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.benchmarks.common import PythonWorkerMemory, bench_spark, bootstrap_servers, check_count, connector_jars, count_committed
from tests.benchmarks.common import produce as produce_one

SIZES = [int(s) for s in os.environ.get("BENCH_SIZES", "1000000,4000000").split(",") if s]
VALUE = b"v" * 100
SMALL_PARTITIONS = 64
WARM_BATCHES = int(os.environ.get("BENCH_WARM_BATCHES", "6"))
LONG_BATCHES = int(os.environ.get("BENCH_LONG_BATCHES", "40"))


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with ExitStack() as stack:
        bootstrap = bootstrap_servers(stack)
        admin = AdminClient({"bootstrap.servers": bootstrap})

        def new_topic(role: str, partitions: int = 1) -> str:
            topic = f"bench-memory-{role}-{uuid.uuid4().hex[:8]}"
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
            return topic

        spark = bench_spark("bench-memory", connector_jars(), spark__driver__memory="4g")
        print(f">> pyspark {spark.version}, local[2]; one partition, {len(VALUE)}-byte values")
        print(f"{'records in the partition':>26}  {'read, compiled: peak worker RSS':>32}  {'read, pure-Python':>18}  "
              f"{'write, compiled':>16}  {'write, pure-Python':>19}")
        for size in SIZES:
            source = new_topic("src")
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
            for i in range(size):
                produce_one(producer, source, VALUE, str(i).encode(), 0)
            producer.flush(120)

            peaks = {}
            for engine in ("native", "python"):
                with PythonWorkerMemory() as reading:
                    row = (spark.read.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
                           .option("readEngine", engine).load()
                           .selectExpr("count(*) AS n", "coalesce(sum(length(value)), 0) AS bytes").collect()[0])
                check_count(f"kafka_eos read ({engine})", row.n, size)
                check_count(f"kafka_eos read ({engine}; value bytes / value size)", row.bytes // len(VALUE), size)
                peaks[engine] = reading.peak_mib

            writes = {}
            for engine in ("native", "python"):
                sink = new_topic("sink")
                with PythonWorkerMemory() as writing:
                    (spark.readStream.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
                     .option("startingOffsets", "earliest").load().selectExpr("key", "value")
                     .writeStream.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
                     .option("writeEngine", engine)
                     .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-memory-")).trigger(availableNow=True)
                     .start().awaitTermination())
                check_count(f"kafka_eos write ({engine})", count_committed(bootstrap, sink, 1), size)
                writes[engine] = writing.peak_mib
            print(f"{size:>26,}  {peaks['native']:>28.0f} MiB  {peaks['python']:>14.0f} MiB  "
                  f"{writes['native']:>12.0f} MiB  {writes['python']:>15.0f} MiB")

        def small_batches(source: str, sink: str, checkpoint: str, freeze: str) -> float:
            """An AvailableNow run of one record a partition a micro-batch; the workers' peak RSS."""
            with PythonWorkerMemory() as running:
                (spark.readStream.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
                 .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", SMALL_PARTITIONS).option("minRecordsPerPartition", 0)
                 .option("gcFreeze", freeze).load().selectExpr("key", "value")
                 .writeStream.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
                 .option("gcFreeze", freeze).option("checkpointLocation", checkpoint).trigger(availableNow=True)
                 .start().awaitTermination())
            return running.peak_mib

        print(f"\n{'many small tasks (' + str(SMALL_PARTITIONS) + ' a micro-batch)':>40}  "
              f"{'peak worker RSS, first ' + str(WARM_BATCHES) + ' batches':>34}  {'then ' + str(LONG_BATCHES) + ' more':>14}")
        for freeze in ("true", "false"):
            source, sink = new_topic("small-src", SMALL_PARTITIONS), new_topic("small-sink", SMALL_PARTITIONS)
            checkpoint = tempfile.mkdtemp(prefix="bench-memory-small-")
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
            peaks_by_run = []
            for batches in (WARM_BATCHES, LONG_BATCHES):
                for i in range(batches * SMALL_PARTITIONS):
                    produce_one(producer, source, VALUE, str(i).encode(), i % SMALL_PARTITIONS)
                producer.flush(120)
                peaks_by_run.append(small_batches(source, sink, checkpoint, freeze))
            total = (WARM_BATCHES + LONG_BATCHES) * SMALL_PARTITIONS
            check_count(f"kafka_eos small batches (gcFreeze={freeze})", count_committed(bootstrap, sink, SMALL_PARTITIONS), total)
            print(f"{'gcFreeze=' + freeze + f' ({total:,} read and write tasks)':>40}  {peaks_by_run[0]:>30.0f} MiB  "
                  f"{peaks_by_run[1]:>10.0f} MiB")
        spark.stop()


if __name__ == "__main__":
    main()
