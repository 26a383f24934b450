"""Shared by the benchmarks: the broker, Spark's Kafka connector jars, and producing fast."""

from __future__ import annotations

import os
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Optional

from confluent_kafka import Producer

CONNECTOR_JARS = Path(os.environ.get("KAFKA_EOS_HOME", ".")) / ".cache" / "spark-kafka" / "jars"
# Only the connector and what it adds to Spark; pyspark already ships Scala, slf4j, lz4, snappy.
CONNECTOR_JAR_PREFIXES = ("spark-sql-kafka-0-10", "spark-token-provider-kafka-0-10", "kafka-clients", "commons-pool2")


def find_connector_jars(directory: Path = CONNECTOR_JARS) -> list[Path]:
    """The jars of Spark's Kafka connector resolved by make into ``directory``; empty if none."""
    jars = sorted(j for j in directory.glob("*.jar") if j.name.startswith(CONNECTOR_JAR_PREFIXES))
    return jars if any(j.name.startswith("spark-sql-kafka") for j in jars) else []


def connector_jars() -> list[Path]:
    jars = find_connector_jars()
    if not jars:
        sys.exit(f"Spark's Kafka connector is not in {CONNECTOR_JARS}: run the benchmark through make, which resolves it.")
    return jars


def bootstrap_servers(stack: ExitStack) -> str:
    """$KAFKA_EOS_BOOTSTRAP_SERVERS, else an embedded broker that lives as long as ``stack``."""
    existing = os.environ.get("KAFKA_EOS_BOOTSTRAP_SERVERS")
    if existing:
        return existing
    from tests.harness.local_kafka import LocalKafka

    return stack.enter_context(LocalKafka(Path(tempfile.mkdtemp(prefix="kafka-eos-bench-")), heap="2g")).bootstrap_servers


def produce(producer: Producer, topic: str, value: bytes, key: Optional[bytes], partition: int) -> None:
    """``producer.produce``, waiting while librdkafka's queue is full."""
    while True:
        try:
            producer.produce(topic, value, key, partition)
            return
        except BufferError:
            producer.poll(0.05)


class PythonWorkerMemory:
    """Samples the resident memory of Spark's Python workers (Python processes running pyspark's
    daemon or worker modules) in a background thread; ``peak_mib`` is the largest single one."""

    def __init__(self, interval_s: float = 0.05) -> None:
        import threading

        self._interval_s = interval_s
        self._stop = threading.Event()
        self.peak_mib = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "PythonWorkerMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    argv = (proc / "cmdline").read_bytes().split(b"\0")
                    if b"python" not in argv[0] or b"pyspark" not in b" ".join(argv[1:]):
                        continue  # the JVM's command line names pyspark too
                    rss_kib = next(int(line.split()[1]) for line in (proc / "status").read_text().splitlines() if line.startswith("VmRSS:"))
                except (OSError, StopIteration, ValueError):
                    continue
                self.peak_mib = max(self.peak_mib, rss_kib / 1024)
            self._stop.wait(self._interval_s)


def bench_spark(app_name: str, jars: list[Path], **config: str) -> Any:
    """A local[2] session with Spark's Kafka connector ``jars``, quiet, and ``config`` (dots as __)."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]").appName(app_name)
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.jars", ",".join(str(j) for j in jars))
    )
    for key, value in config.items():
        builder = builder.config(key.replace("__", "."), value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark

