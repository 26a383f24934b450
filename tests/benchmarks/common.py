"""Shared by the benchmarks: the broker, Spark's Kafka connector jars, and producing fast."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.benchmarks.broker_requests import RequestLog
from tests.harness.kafka import KafkaTestCluster

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
    """$KAFKA_EOS_BOOTSTRAP_SERVERS, else an embedded broker that lives as long as ``stack``, its data directory
    removed after it stops. With ``BENCH_REQUESTS=1`` that broker logs its requests (:func:`request_log`)."""
    global _REQUEST_LOG
    existing = os.environ.get("KAFKA_EOS_BOOTSTRAP_SERVERS")
    if existing:
        return existing
    from tests.harness.local_kafka import LocalKafka

    data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kafka-eos-bench-")))
    broker = stack.enter_context(LocalKafka(data_dir, heap="2g", request_log=os.environ.get("BENCH_REQUESTS") == "1"))
    _REQUEST_LOG = RequestLog(broker.request_log_file) if broker.request_log else None
    return broker.bootstrap_servers


_REQUEST_LOG: RequestLog | None = None


def request_log() -> RequestLog | None:
    """The embedded broker's request log, where ``BENCH_REQUESTS=1`` asked for one."""
    return _REQUEST_LOG


def produce(producer: Producer, topic: str, value: bytes, key: bytes | None, partition: int) -> None:
    """``producer.produce``, waiting while librdkafka's queue is full."""
    while True:
        try:
            producer.produce(topic, value, key, partition)
            return
        except BufferError:
            producer.poll(0.05)


class CountMismatch(RuntimeError):
    """A system under measurement moved another number of records than was produced: its time means nothing."""


def check_count(label: str, counted: int, expected: int) -> int:
    """``counted`` if it is ``expected``; else :class:`CountMismatch` naming ``label``."""
    if counted != expected:
        raise CountMismatch(f"{label} moved {counted:,} records, not the {expected:,} produced: its figure would be meaningless")
    return counted


def count_committed(bootstrap: str, topic: str, partitions: int) -> int:
    """The records of ``topic`` that an independent read_committed consumer sees, read to the end once every
    partition's last stable offset reached its high watermark: a commit returns before its markers are written."""
    KafkaTestCluster(bootstrap).wait_until_stable(topic, timeout_s=60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4().hex}", "isolation.level": "read_committed",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    count, ended = 0, set()
    while len(ended) < partitions:
        for message in consumer.consume(10_000, 1.0):
            if message.error():
                ended.add(message.partition())
            else:
                count += 1
    consumer.close()
    return count


Count = Callable[[], int]
Run = Callable[[], Count]
"""One run of a system: does the work (and only that is timed), then returns how to count the records it read
or wrote, independently of the system."""


def alternate(systems: dict[str, Run], expected: int, rounds: int, warm_up: dict[str, Run] | None = None,
              warm_up_expected: int | None = None) -> dict[str, list[float]]:
    """Warm each system up once (``warm_up[label]`` moving ``warm_up_expected`` records, else a full run),
    then time ``rounds`` rounds that run the systems in turn. Every run's count must be what it should
    be. The seconds of each system's timed runs."""
    for label, run in systems.items():
        warm = (warm_up or {}).get(label)
        check_count(f"{label} (warm-up)", (warm or run)()(), expected if warm is None else (warm_up_expected or 0))
    seconds: dict[str, list[float]] = {label: [] for label in systems}
    for round_ in range(rounds):
        for label, run in systems.items():
            start = time.perf_counter()
            count = run()
            seconds[label].append(time.perf_counter() - start)
            check_count(f"{label} (round {round_ + 1})", count(), expected)
    return seconds


def report(seconds: dict[str, list[float]], records: int) -> dict[str, float]:
    """Print each system's median time and throughput over its rounds; the median rows/s by label."""
    rates = {}
    for label, times in seconds.items():
        median = statistics.median(times)
        rates[label] = records / median
        print(f"   {label:<54} {records:>10,} rows  median {median:7.2f} s of {len(times)}  {rates[label]:>10,.0f} rows/s "
              f"(rounds: {', '.join(f'{t:.2f}' for t in times)} s)", flush=True)
    return rates


class PythonWorkerMemory:
    """Samples the resident memory of Spark's Python workers (Python processes running pyspark's
    daemon or worker modules) in a background thread; ``peak_mib`` is the largest single one."""

    def __init__(self, interval_s: float = 0.05) -> None:
        import threading

        self._interval_s = interval_s
        self._stop = threading.Event()
        self.peak_mib = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PythonWorkerMemory:
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
                    if not _is_spark_python_worker((proc / "cmdline").read_bytes().split(b"\0")):
                        continue
                    rss_kib = next(int(line.split()[1]) for line in (proc / "status").read_text().splitlines() if line.startswith("VmRSS:"))
                except (OSError, StopIteration, ValueError):
                    continue
                self.peak_mib = max(self.peak_mib, rss_kib / 1024)
            self._stop.wait(self._interval_s)


def _is_spark_python_worker(argv: list[bytes]) -> bool:
    """A Python process running pyspark's daemon or worker modules (the JVM's command line names pyspark too)."""
    return b"python" in argv[0] and b"pyspark" in b" ".join(argv[1:])


CPU_KINDS = ("Kafka broker", "Spark JVM", "Spark Python workers", "benchmark process")


class ProcessCpu:
    """CPU seconds used by this machine's processes while it is entered, by kind (:data:`CPU_KINDS`): the
    broker's JVM, Spark's JVM, Spark's Python workers, and this process (with its librdkafka threads). A
    process that ends inside the span is not counted; Spark keeps its Python workers for reuse."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(CPU_KINDS, 0.0)
        self._start: dict[int, tuple[str, float]] = {}

    def __enter__(self) -> ProcessCpu:
        self._start = _cpu_by_process()
        return self

    def __exit__(self, *exc: object) -> None:
        for pid, (kind, used) in _cpu_by_process().items():
            self.seconds[kind] += used - self._start.get(pid, (kind, 0.0))[1]


def _cpu_by_process() -> dict[int, tuple[str, float]]:
    ticks = os.sysconf("SC_CLK_TCK")
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(proc.name) == os.getpid():
            kind = "benchmark process"
        elif b"kafka.Kafka" in argv:
            kind = "Kafka broker"
        elif b"java" in argv[0] and any(b"org.apache.spark" in a for a in argv):
            kind = "Spark JVM"
        elif _is_spark_python_worker(argv):
            kind = "Spark Python workers"
        else:
            continue
        found[int(proc.name)] = (kind, (int(fields[11]) + int(fields[12])) / ticks)  # utime + stime
    return found


def with_cpu(systems: dict[str, Run]) -> tuple[dict[str, Run], dict[str, list[dict[str, float]]]]:
    """``systems``, each run adding the CPU seconds each process kind used while it ran to its list in the
    second dict (for :func:`report_cpu`)."""
    cpu: dict[str, list[dict[str, float]]] = {label: [] for label in systems}

    def measured(run: Run, into: list[dict[str, float]]) -> Run:
        def wrapped() -> Count:
            with ProcessCpu() as used:
                count = run()
            into.append(used.seconds)
            return count

        return wrapped

    return {label: measured(run, cpu[label]) for label, run in systems.items()}, cpu


def report_cpu(cpu: dict[str, list[dict[str, float]]], seconds: dict[str, list[float]]) -> None:
    """Each system's median CPU seconds by process kind beside its median wall time: on this machine's cores, a
    run cannot be faster than the CPU it needs divided by the cores."""
    cores = os.cpu_count() or 1
    print(f"   CPU seconds by process (medians over the timed rounds; {cores} cores)")
    print(f"   {'':<54} {'wall':>6}  " + "  ".join(f"{kind:>20}" for kind in CPU_KINDS) + f"  {'all / cores':>11}")
    for label, runs in cpu.items():
        medians = {kind: statistics.median(r[kind] for r in runs) for kind in CPU_KINDS}
        print(f"   {label:<54} {statistics.median(seconds[label]):6.2f}  " + "  ".join(f"{medians[kind]:>20.2f}" for kind in CPU_KINDS)
              + f"  {sum(medians.values()) / cores:>11.2f}", flush=True)


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

