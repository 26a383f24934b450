"""The benchmarks count what they move: a run whose output differs from what was produced stops the
benchmark instead of printing a figure. A small run of each benchmark against the test broker shows the
counts hold end to end (the figures themselves are not judged: timings never go in tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import OffsetSpec

from tests.benchmarks.common import Count, CountMismatch, alternate, count_committed
from tests.harness.kafka import KafkaTestCluster, Sent

pytestmark = [pytest.mark.kafka, pytest.mark.long]

PROJECT = Path(__file__).resolve().parents[3]


def test_the_count_is_read_committed_and_a_short_count_stops_the_benchmark(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(2, prefix="bench-count")
    kafka.open_transaction(topic, [Sent(p % 2, None, b"kept") for p in range(7)]).commit()
    kafka.open_transaction(topic, [Sent(p % 2, None, b"aborted") for p in range(3)]).abort()
    assert sum(kafka.offsets(topic, OffsetSpec.latest(), committed=False).values()) >= 10  # the aborted records are in the log
    assert count_committed(kafka.bootstrap_servers, topic, 2) == 7

    def reads_the_topic() -> Count:
        return lambda: count_committed(kafka.bootstrap_servers, topic, 2)

    assert len(alternate({"honest reader": reads_the_topic}, expected=7, rounds=2)["honest reader"]) == 2
    with pytest.raises(CountMismatch, match=r"lossy reader \(warm-up\) moved 7 records, not the 10 produced"):
        alternate({"lossy reader": reads_the_topic}, expected=10, rounds=1)


@pytest.mark.spark
@pytest.mark.parametrize(("benchmark", "systems"), [("bench_read", 5), ("bench_write", 9)])
def test_a_small_benchmark_run_counts_every_system_in_every_round(benchmark: str, systems: int, kafka: KafkaTestCluster) -> None:
    env = {**os.environ, "KAFKA_EOS_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "BENCH_RECORDS": "3000", "BENCH_ROUNDS": "2",
           "PYTHONPATH": str(PROJECT)}
    done = subprocess.run([sys.executable, "-m", f"tests.benchmarks.{benchmark}"], cwd=PROJECT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    medians = [line for line in done.stdout.splitlines() if " median " in line and "rows/s" in line]
    assert len(medians) == systems and all("3,000 rows" in line and "of 2 " in line for line in medians), done.stdout
    assert "throughput ratio (medians)" in done.stdout
    if benchmark == "bench_write":  # the streaming query's five systems, then the sinks alone, each with its CPU by process
        assert done.stdout.count("CPU seconds by process") == 2, done.stdout


@pytest.mark.spark
def test_a_small_latency_run_reports_every_system_and_the_end_to_end_latency(kafka: KafkaTestCluster) -> None:
    env = {**os.environ, "KAFKA_EOS_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "BENCH_PARTITIONS": "2", "BENCH_BATCHES": "3",
           "BENCH_ROUNDS": "1", "BENCH_E2E_RATE": "500", "BENCH_E2E_SECONDS": "6", "BENCH_E2E_WARMUP_SECONDS": "1",
           "PYTHONPATH": str(PROJECT)}
    done = subprocess.run([sys.executable, "-m", "tests.benchmarks.bench_latency"], cwd=PROJECT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    from tests.benchmarks.bench_latency import LABELS

    rows = [line for line in done.stdout.splitlines() if line.startswith("         2  ")]
    assert all(any(label in row for row in rows) for label in LABELS.values()), done.stdout
    assert "pipeline ratio kafka_eos / Spark's JVM" in done.stdout
    assert done.stdout.count(" p50 ms ") >= 1 and "end-to-end p99 ratio kafka_eos / Spark's JVM" in done.stdout, done.stdout
