"""A seeded, bounded fault soak: Kafka -> Spark -> Kafka pipelines (the streaming notebook) and backfills
(the batch notebook), each hit by a fault drawn at random, then re-run until they succeed, then judged by
an independent read_committed consumer and Kafka's own tools.

    python -m tests.harness.soak --seed 7 --runs 20 --max-minutes 45     # make soak SOAK_SEED=7 SOAK_RUNS=20

Fault kinds, taken in turns (a seeded shuffle of each round of four), with their details drawn at random:
- ``driver@<point>``: the driver JVM SIGKILLed before the decision, after it, or in phase 2;
- ``task``: a task's Python worker SIGKILLed in the middle of its write;
- ``broker``: the broker SIGKILLed at a random moment of the job and restarted on its data directory after
  a few seconds (on this single-broker soak it is the partition leader, the transaction coordinator and the
  group coordinator at once);
- a pair: a driver or task fault, and a broker crash.
A fault that did not hit the job (a broker killed after the job had ended) is reported as not hit.

Every run must end with every input record in the output exactly once, the consumer group at the input's
ends, no open transaction of the prefix, and the last stable offset equal to the high watermark.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from confluent_kafka.admin import OffsetSpec

from tests.harness.faults import MARKERS_ENV
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import open_transactions_by_kafka
from tests.harness.local_kafka import LocalKafka
from tests.harness.notebook_runner import notebook_command

PROJECT = Path(__file__).resolve().parents[2]
NOTEBOOKS = PROJECT / "notebooks"
DRIVER_POINTS = ("before_decision", "after_decision", "during_phase2")
KINDS = ("driver", "task", "broker", "pair")
MAX_ATTEMPTS = 4
JOB_TIMEOUT_S = 300


@dataclass
class RunResult:
    """What one soak run did and what the judges counted."""

    run: int
    kind: str
    job: str
    faults: list[str]
    records: int
    attempts: int = 0
    failed_attempts: int = 0
    fired: list[str] = field(default_factory=list)
    hit: bool = False
    output: int = 0
    duplicates: int = 0
    lost: int = 0
    open_transactions: int = 0
    unstable_partitions: int = 0
    group_at_ends: bool = False
    broker_recovery_s: Optional[float] = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return (self.duplicates == 0 and self.lost == 0 and self.open_transactions == 0 and self.unstable_partitions == 0
                and self.group_at_ends and self.output == self.records)


def kinds_in_turns(rng: random.Random, runs: int) -> list[str]:
    """``runs`` fault kinds: every round of four has each kind once, in a seeded order."""
    order: list[str] = []
    while len(order) < runs:
        round_ = list(KINDS)
        rng.shuffle(round_)
        order.extend(round_)
    return order[:runs]


def faults_of(kind: str, rng: random.Random) -> list[str]:
    """The concrete faults of a kind: a driver kill point is drawn; a pair adds a broker crash."""
    driver = f"driver@{rng.choice(DRIVER_POINTS)}"
    if kind == "driver":
        return [driver]
    if kind == "pair":
        return [rng.choice([driver, "task"]), "broker"]
    return [kind]


def crash_and_restart(broker: LocalKafka, after_s: float, down_s: float, recovered: list[float], killed_at: list[float]) -> None:
    """SIGKILL the broker ``after_s`` from now, leave it down ``down_s``, restart it on its data directory;
    append when it was killed and how long it took to serve again."""
    time.sleep(after_s)
    if not broker.running:
        return
    killed_at.append(time.monotonic())
    broker.kill()
    time.sleep(down_s)
    started = time.monotonic()
    broker.start()
    recovered.append(time.monotonic() - started)


def run_once(index: int, kind: str, rng: random.Random, broker: LocalKafka, workdir: Path, records: int) -> RunResult:
    kafka = KafkaTestCluster(broker.bootstrap_servers)
    job_kind = rng.choice(["stream", "backfill"])
    faults = faults_of(kind, rng)
    result = RunResult(index, kind, job_kind, faults, records)
    started = time.monotonic()
    source, sink = kafka.create_topic(3, prefix=f"soak{index}-src"), kafka.create_topic(3, prefix=f"soak{index}-sink")
    sent = kafka.produce_plain(source, [Sent(i % 3, f"k{i}".encode(), f"r{index}-{i}".encode()) for i in range(records)])
    tag = uuid.uuid4().hex[:6]
    group = f"soak-{tag}"
    if job_kind == "stream":
        checkpoint = str(workdir / f"checkpoint-{tag}")
        from spark_kafka_eos.write.writer_options import derived_prefix

        prefix = derived_prefix(checkpoint)
        command = notebook_command(NOTEBOOKS / "eos_pipeline.py", bootstrap_servers=kafka.bootstrap_servers, source=source, sink=sink,
                                   checkpoint=checkpoint, consumer_group=group, max_offsets_per_trigger=str(max(records // 3, 1)))
        expected = [b"processed:" + (s.value or b"") for s in sent]
    else:
        prefix = f"soak-{tag}"
        command = notebook_command(NOTEBOOKS / "backfill.py", bootstrap_servers=kafka.bootstrap_servers, source=source, sink=sink,
                                   consumer_group=group, prefix=prefix, write_id=f"run-{index}")
        expected = [b"backfilled:" + (s.value or b"") for s in sent]

    recovered: list[float] = []
    killed_at: list[float] = []
    markers = Path(os.environ[MARKERS_ENV])
    for marker in markers.iterdir():
        marker.unlink()
    for attempt in range(MAX_ATTEMPTS):
        extra: list[str] = []
        crash: Optional[threading.Thread] = None
        fault = next((f for f in faults if f != "broker"), None)
        # Until it fires: a broker crash can fail an attempt before it reaches the fault's point.
        if fault is not None and not any(markers.iterdir()):
            if fault == "task":
                extra = ["--fail-at", "task_write:kill", "--conf", "spark.sql.execution.arrow.maxRecordsPerBatch=50"]
            else:
                extra = ["--fail-at", f"{fault.split('@')[1]}:kill-driver"]
        if attempt == 0:
            if "broker" in faults:
                crash = threading.Thread(target=crash_and_restart, args=(broker, rng.uniform(3, 15), rng.uniform(1, 5), recovered, killed_at))
                crash.start()
        result.attempts += 1
        try:
            done = subprocess.run(command + extra, capture_output=True, text=True, timeout=JOB_TIMEOUT_S, cwd=PROJECT)
            succeeded = done.returncode == 0
        except subprocess.TimeoutExpired:
            succeeded = False
        job_ended = time.monotonic()  # before the crash thread is joined: it may kill after the job ended
        if crash is not None:
            crash.join(120)
        if succeeded:
            break
        result.failed_attempts += 1
    result.fired = sorted(m.name for m in markers.iterdir())
    broker_hit = bool(killed_at) and killed_at[0] < job_ended
    result.hit = all(broker_hit if f == "broker" else bool(result.fired) for f in faults)
    result.broker_recovery_s = round(recovered[0], 1) if recovered else None

    kafka.wait_until_stable(sink, timeout_s=120)
    out = Counter(r.value for r in kafka.read_committed(sink))
    result.output = sum(out.values())
    result.duplicates = sum(n - 1 for n in out.values() if n > 1)
    result.lost = len(set(expected) - set(out))
    result.open_transactions = len(open_transactions_by_kafka(kafka.bootstrap_servers, prefix + "-"))
    for topic in (sink, "_kafka_eos_decisions"):
        stable, written = kafka.offsets(topic, OffsetSpec.latest()), kafka.offsets(topic, OffsetSpec.latest(), committed=False)
        result.unstable_partitions += sum(1 for p in written if stable.get(p) != written[p])
    result.group_at_ends = kafka.group_offsets(group, source) == kafka.offsets(source, OffsetSpec.latest())
    result.seconds = round(time.monotonic() - started, 1)
    return result


def soak(seed: int, runs: int, max_minutes: float, records: int, workdir: Path) -> list[RunResult]:
    """``runs`` seeded runs on a broker of their own, stopping early when ``max_minutes`` are used up."""
    rng = random.Random(seed)
    kinds = kinds_in_turns(rng, runs)
    os.environ.setdefault(MARKERS_ENV, tempfile.mkdtemp(prefix="soak-markers-"))
    deadline = time.monotonic() + max_minutes * 60
    results: list[RunResult] = []
    with LocalKafka(workdir / "broker") as broker:
        for index in range(runs):
            if time.monotonic() > deadline:
                break
            result = run_once(index, kinds[index], rng, broker, workdir, records)
            results.append(result)
            print(json.dumps({**asdict(result), "ok": result.ok}), flush=True)
    return results


def summary(results: list[RunResult]) -> str:
    """A table of runs by fault kind (the JSON lines printed per run say which faults exactly)."""
    by_kind: dict[str, list[RunResult]] = {}
    for r in results:
        by_kind.setdefault(r.kind, []).append(r)
    lines = ["| faults | runs | fault hit | ok | records | failed attempts | duplicates | lost | open txns | LSO<HW partitions | broker back after (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for kind, rs in sorted(by_kind.items()):
        recoveries = [r.broker_recovery_s for r in rs if r.broker_recovery_s is not None]
        lines.append(f"| {kind} | {len(rs)} | {sum(r.hit for r in rs)} | {sum(r.ok for r in rs)} | {sum(r.records for r in rs)} | "
                     f"{sum(r.failed_attempts for r in rs)} | {sum(r.duplicates for r in rs)} | "
                     f"{sum(r.lost for r in rs)} | {sum(r.open_transactions for r in rs)} | {sum(r.unstable_partitions for r in rs)} | "
                     f"{', '.join(f'{x:g}' for x in recoveries) or '-'} |")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--max-minutes", type=float, default=60)
    parser.add_argument("--records", type=int, default=600)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kafka-eos-soak-") as workdir:
        results = soak(args.seed, args.runs, args.max_minutes, args.records, Path(workdir))
    print(summary(results))
    failed = [r for r in results if not r.ok]
    print(f"{len(results)} runs, {len(failed)} failed (seed {args.seed})")
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
