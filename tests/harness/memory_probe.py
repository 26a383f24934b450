"""A batch read in a Spark of its own that reports the peak RSS of the Python tasks that read Kafka.

``format("kafka_eos_memory")`` is kafka_eos whose partition reads, once drained, append their process's
``ru_maxrss`` (KiB) to a file in ``$KAFKA_EOS_MEMORY_DIR``. Run as a module (one SparkSession without
Python worker reuse: each task is a fresh worker, so no earlier task inflates its peak)::

    python -m tests.harness.memory_probe <bootstrap> <topic>,<topic>... <option=value>...
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from spark_kafka_eos.datasource import KafkaEosDataSource

MEMORY_DIR_ENV = "KAFKA_EOS_MEMORY_DIR"
REPO_ROOT = Path(__file__).resolve().parents[2]


class _PeakReportingReader(DataSourceReader):
    def __init__(self, inner: DataSourceReader) -> None:
        self._inner = inner

    def partitions(self) -> list[InputPartition]:
        return list(self._inner.partitions())

    def read(self, partition: InputPartition) -> Iterator[Any]:
        yield from self._inner.read(partition)
        with open(Path(os.environ[MEMORY_DIR_ENV]) / f"{uuid.uuid4().hex}.kib", "w") as report:
            report.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))


class MemoryProbeDataSource(KafkaEosDataSource):
    """``format("kafka_eos_memory")``: kafka_eos whose tasks report their peak RSS."""

    @classmethod
    def name(cls) -> str:
        return "kafka_eos_memory"

    def reader(self, schema: StructType) -> DataSourceReader:
        return _PeakReportingReader(super().reader(schema))


def peak_task_rss_kib(bootstrap_servers: str, topics: list[str], options: dict[str, str], timeout_s: float = 150.0) -> list[tuple[int, int]]:
    """Read each topic in turn, in one fresh Spark subprocess: (records read, largest peak RSS in KiB
    of the read's tasks) per topic. Every task is a new Python worker forked from the same daemon."""
    with tempfile.TemporaryDirectory() as reports:
        env = {**os.environ, MEMORY_DIR_ENV: reports, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable}
        args = [f"{k}={v}" for k, v in options.items()]
        done = subprocess.run(
            [sys.executable, "-m", "tests.harness.memory_probe", bootstrap_servers, ",".join(topics), *args],
            env=env, capture_output=True, text=True, timeout=timeout_s, cwd=REPO_ROOT,
        )
        if done.returncode != 0:
            raise RuntimeError(f"memory probe exited {done.returncode}: {done.stderr[-3000:]}")
        return [tuple(json.loads(line)) for line in done.stdout.splitlines() if line.startswith("[")]


def _peak_reported(reports: Path) -> int:
    """The largest peak the tasks reported since the last call (their reports are removed)."""
    files = list(reports.glob("*.kib"))
    if not files:
        raise RuntimeError("no task reported its peak RSS")
    peak = max(int(f.read_text()) for f in files)
    for f in files:
        f.unlink()
    return peak


def _main(bootstrap_servers: str, topics: str, *options: str) -> None:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]").appName("kafka-eos-memory-probe")
        .config("spark.ui.enabled", "false").config("spark.python.worker.reuse", "false").getOrCreate()
    )
    try:
        spark.dataSource.register(MemoryProbeDataSource)
        for topic in topics.split(","):
            reader = spark.read.format("kafka_eos_memory").option("kafka.bootstrap.servers", bootstrap_servers).option("subscribe", topic)
            for option in options:
                name, _, value = option.partition("=")
                reader = reader.option(name, value)
            # Every value goes through the task (a sum of lengths, not a count that could skip them).
            row = reader.load().selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect()[0]
            print(json.dumps([row.n, _peak_reported(Path(os.environ[MEMORY_DIR_ENV]))]), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    _main(*sys.argv[1:])
