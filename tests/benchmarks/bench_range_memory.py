"""Peak memory of one process reading one Kafka partition with the package's range reader, no Spark.

    PYTHONPATH=. .venv/bin/python -m tests.benchmarks.bench_range_memory
    BENCH_SIZES=1000000,4000000 PYTHONPATH=. .venv/bin/python -m tests.benchmarks.bench_range_memory

``make bench-memory`` samples Spark's Python workers, which pyspark reuses from read to read, so a figure there is
the peak of a worker that has already done the reads before it. Here every read runs in a fresh process
(``read_offset_range`` over a whole partition of 100-byte values, counted), on both read paths, with the package's
librdkafka settings and with librdkafka's own fetch size (``kafka.max.partition.fetch.bytes=1048576``): its peak
RSS (``ru_maxrss``) against the records read shows whether a read's memory grows with its range.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.benchmarks.common import bootstrap_servers, produce

SIZES = [int(s) for s in os.environ.get("BENCH_SIZES", "1000000,4000000,8000000").split(",") if s]
VALUE = b"v" * 100
SETTINGS: dict[str, dict[str, str]] = {
    "package defaults": {},
    "librdkafka's fetch size (1 MiB)": {"kafka.max.partition.fetch.bytes": str(1 << 20)},
}


def read_in_this_process(bootstrap: str, topic: str, end: int, engine: str, extra: dict[str, str]) -> dict[str, float]:
    from spark_kafka_eos._internal.config.reader import parse_reader_options
    from spark_kafka_eos._internal.read.partition_reader import read_offset_range
    from spark_kafka_eos._internal.read.planner import OffsetRange

    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "readEngine": engine, **extra}
    parsed = parse_reader_options({k.lower(): v for k, v in options.items()}, streaming=False)
    before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    began = time.perf_counter()
    rows = sum(batch.num_rows for batch in read_offset_range(parsed, OffsetRange(topic, 0, 0, end)))
    if rows != end:
        raise RuntimeError(f"read {rows:,} records of {end:,}")
    return {"before_mib": before_kib / 1024, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "seconds": time.perf_counter() - began}


def read_in_new_process(bootstrap: str, topic: str, end: int, engine: str, extra: dict[str, str]) -> dict[str, float]:
    args = [sys.executable, "-m", __spec__.name, bootstrap, topic, str(end), engine, json.dumps(extra)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the read failed: {done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def produce_up_to(producer: Producer, topic: str, produced: int, records: int) -> int:
    for number in range(produced, records):
        produce(producer, topic, VALUE, str(number).encode(), 0)
    producer.flush(120)
    return max(produced, records)


def main() -> None:
    with ExitStack() as stack:
        bootstrap = bootstrap_servers(stack)
        topic = f"bench-range-memory-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000})
        print(">> one fresh process a read of a whole partition; peak RSS (MiB) and seconds")
        produced = 0
        for records in SIZES:
            produced = produce_up_to(producer, topic, produced, records)
            for engine in ("native", "python"):
                for label, extra in SETTINGS.items():
                    r = read_in_new_process(bootstrap, topic, records, engine, extra)
                    print(f"   {records:>10,} records  readEngine={engine:<6}  {label:<32}  peak {r['peak_mib']:6.1f} MiB "
                          f"(at start {r['before_mib']:5.1f})  {r['seconds']:5.2f} s", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(json.dumps(read_in_this_process(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], json.loads(sys.argv[5]))))
    else:
        main()
