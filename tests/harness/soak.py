"""A seeded, bounded fault soak: Kafka -> Spark -> Kafka pipelines (the streaming notebook) and backfills
(the batch notebook), each hit by a fault drawn at random, then re-run until they succeed, then judged by
an independent read_committed consumer and Kafka's own tools.

    python -m tests.harness.soak --brokers 3 --seed 7 --runs 25 --max-minutes 60   # make soak SOAK_SEED=7 SOAK_RUNS=25

The Kafka is a three-node KRaft cluster (replication factor 3, min.insync.replicas 2 for data topics, the
transaction and offsets topics and the decision log), or with ``--brokers 1`` one broker. The source of
every run holds committed and aborted transactions, so the reader filters aborted records throughout.

Fault kinds, taken in turns (a seeded shuffle of each round of five), with their details drawn at random:
- ``driver@<point>``: the driver JVM SIGKILLed before the decision, after it, in phase 2, or while its
  tasks read and write (``task_write``: in ``local[2]`` the tasks run in the driver's JVM);
- ``task``: a task's Python worker SIGKILLed in the middle of its write;
- ``executor``: with executors in JVMs of their own (``local-cluster[2,1,1024]``), the executor JVM running
  a task SIGKILLed in the middle of its write;
- ``broker:<role>@<moment>``: the broker that is the partition leader (of the source while reading, else
  of the sink), the prefix's transaction coordinator, or the consumer group's coordinator, SIGKILLed while
  the job starts and reads (a random moment in its first 5-20 s: Spark starts, plans and reads its
  first micro-batch then), or while a task writes, before the decision, after it, or in phase 2
  (the job stalls there for a few seconds: the fault marker says when), and restarted on its data
  directory a few seconds later;
- ``pair``: a driver, task or executor fault, and a broker crash while reading.
A fault that did not hit the job (a broker crash drawn after the job had ended) is reported as not hit.

Every run must end with every committed input record in the output exactly once (and no aborted one), the
consumer group just past each partition's last committed input record, no open transaction of the prefix, and the last stable offset equal
to the high watermark on the sink and the decision log.
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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka.admin import OffsetSpec

from spark_kafka_eos._internal.config.writer import derived_prefix
from spark_kafka_eos._internal.decision_log.coordinator_id import coordinator_transactional_id
from spark_kafka_eos._internal.write.hooks import POINTS
from tests.harness.faults import MARKERS_ENV
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import open_transactions_by_kafka
from tests.harness.local_cluster import LocalCluster
from tests.harness.local_kafka import LocalKafka, StartStop
from tests.harness.notebook_runner import notebook_command

PROJECT = Path(__file__).resolve().parents[2]
NOTEBOOKS = PROJECT / "notebooks"
DRIVER_POINTS = POINTS
KINDS = ("driver", "task", "executor", "broker", "pair")
BROKER_ROLES = ("leader", "txn-coordinator", "group-coordinator")
COMMIT_MOMENTS = ("task_write",) + DRIVER_POINTS
"""Moments at which the job stalls, inside a write or a commit, until the broker crash has happened: the
crash then certainly meets the job's next Kafka call."""
BROKER_MOMENTS = ("reading",) + COMMIT_MOMENTS
SEPARATE_EXECUTORS = "local-cluster[2,1,1024]"
SMALL_ARROW_BATCHES = ["--conf", "spark.sql.execution.arrow.maxRecordsPerBatch=10"]  # so a task has a second batch to die at
PAUSE_S = 8
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
    aborted_records: int = 0
    attempts: int = 0
    failed_attempts: int = 0
    failures: list[str] = field(default_factory=list)
    fired: list[str] = field(default_factory=list)
    hit: bool = False
    broker_killed: int | None = None
    output: int = 0
    duplicates: int = 0
    lost: int = 0
    unexpected: int = 0
    open_transactions: int = 0
    unstable_partitions: int = 0
    group_at_ends: bool = False
    broker_recovery_s: float | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return (self.duplicates == 0 and self.lost == 0 and self.unexpected == 0 and self.open_transactions == 0
                and self.unstable_partitions == 0 and self.group_at_ends and self.output == self.records)


def kinds_in_turns(rng: random.Random, runs: int, kinds: tuple[str, ...] = KINDS) -> list[str]:
    """``runs`` fault kinds: every round has each of ``kinds`` once, in a seeded order."""
    order: list[str] = []
    while len(order) < runs:
        round_ = list(kinds)
        rng.shuffle(round_)
        order.extend(round_)
    return order[:runs]


def faults_of(kind: str, rng: random.Random, broker_moments: tuple[str, ...] = BROKER_MOMENTS) -> list[str]:
    """The concrete faults of a kind: a driver kill point, a broker's role and moment are drawn; a pair adds
    a broker crash while reading to a process fault."""
    driver = f"driver@{rng.choice(DRIVER_POINTS + ('task_write',))}"
    if kind == "driver":
        return [driver]
    if kind == "broker":
        return [f"broker:{rng.choice(BROKER_ROLES)}@{rng.choice(broker_moments)}"]
    if kind == "pair":
        return [rng.choice([driver, "task", "executor"]), f"broker:{rng.choice(BROKER_ROLES)}@reading"]
    return [kind]


def process_fault(fault: str) -> tuple[list[str], str]:
    """The notebook runner's arguments that make a driver, task or executor fault happen, and the marker it leaves."""
    if fault == "task":
        return ["--fail-at", "task_write:kill", *SMALL_ARROW_BATCHES], "task_write_kill"
    if fault in ("executor", "driver@task_write"):
        # In local[2] the JVM a task runs in is the driver's; with local-cluster it is an executor's own.
        master = ["--master", SEPARATE_EXECUTORS] if fault == "executor" else []
        return [*master, "--fail-at", "task_write:kill-executor", *SMALL_ARROW_BATCHES], "task_write_kill-executor"
    point = fault.split("@")[1]
    return ["--fail-at", f"{point}:kill-driver"], f"{point}_kill-driver"


def broker_moment(moment: str) -> tuple[list[str], str | None]:
    """The runner's arguments that stall the job at ``moment`` for :data:`PAUSE_S`, and the marker that says it
    is there (None for ``reading``: a random moment early in the job)."""
    if moment == "reading":
        return [], None
    if moment == "task_write":
        return ["--fail-at", f"task_write:sleep{PAUSE_S}", *SMALL_ARROW_BATCHES], f"task_write_sleep{PAUSE_S}"
    return ["--fail-at", f"{moment}:pause{PAUSE_S}"], f"{moment}_pause{PAUSE_S}"


class SoakKafka(StartStop):
    """The soak's Kafka: one broker, or a cluster of ``size`` nodes, of its own or ``existing`` (a test
    session's cluster, which it neither starts nor stops); finds the node in a role, crashes it (SIGKILL)
    and restarts it on its data directory."""

    def __init__(self, workdir: Path, size: int, existing: LocalKafka | LocalCluster | None = None) -> None:
        if existing is not None:
            size = existing.size if isinstance(existing, LocalCluster) else 1
        self.size = size
        self._kafka: LocalKafka | LocalCluster = existing or (
            LocalKafka(workdir / "broker") if size == 1 else LocalCluster(workdir / "cluster", size=size))
        self._owned = existing is None

    def start(self) -> SoakKafka:
        if self._owned:
            self._kafka.start()
        return self

    def stop(self) -> None:
        if self._owned:
            self._kafka.stop()

    @property
    def bootstrap_servers(self) -> str:
        return self._kafka.bootstrap_servers

    def kafka(self) -> KafkaTestCluster:
        return KafkaTestCluster(self.bootstrap_servers, replication_factor=self.size)

    def node_in(self, role: str, topic: str, group: str, prefix: str) -> int:
        """The node that is ``topic``-0's leader, the prefix's transaction coordinator, or the group's coordinator."""
        if isinstance(self._kafka, LocalKafka):
            return 1
        if role == "leader":
            return self._kafka.leader_of(topic, 0)
        if role == "txn-coordinator":
            return self._kafka.transaction_coordinator(coordinator_transactional_id(prefix))
        return self._kafka.group_coordinator(group)

    def crash(self, node: int, down_s: float) -> float:
        """SIGKILL ``node``, leave it down ``down_s``, restart it; the seconds until it serves again (on a
        cluster: until it is back in the ISR of every partition it replicates)."""
        if isinstance(self._kafka, LocalKafka):
            self._kafka.kill()
            time.sleep(down_s)
            started = time.monotonic()
            self._kafka.start()
            return time.monotonic() - started
        self._kafka.kill(node)
        time.sleep(down_s)
        return self._kafka.restart(node)


@dataclass
class BrokerCrash:
    """A broker crash that waits for its moment (``when()`` true) while the job runs."""

    when: Callable[[], bool]
    node: Callable[[], int]
    down_s: float
    job_done: threading.Event = field(default_factory=threading.Event)
    killed: int | None = None
    recovery_s: float | None = None

    def run(self, kafka: SoakKafka) -> None:
        while not self.when():
            if self.job_done.wait(0.1):
                return
        self.killed = self.node()
        self.recovery_s = kafka.crash(self.killed, self.down_s)


def produce_source(kafka: KafkaTestCluster, source: str, index: int, records: int) -> tuple[list[Sent], int]:
    """``records`` committed records in three transactions, each followed by an aborted one (a record per
    partition); the committed records, and how many were aborted."""
    committed: list[Sent] = []
    aborted = 0
    for chunk in range(3):
        ids = range(chunk * records // 3, (chunk + 1) * records // 3)
        committed += kafka.open_transaction(source, [Sent(i % 3, f"k{i}".encode(), f"r{index}-{i}".encode()) for i in ids]).commit()
        kafka.open_transaction(source, [Sent(p, None, f"aborted-{index}-{chunk}-{p}".encode()) for p in range(3)]).abort()
        aborted += 3
    return committed, aborted


def why_it_failed(returncode: int, stderr: str) -> str:
    """The last error line a failed attempt printed (the exception that ended it), or its exit status."""
    errors = [line.strip() for line in stderr.splitlines() if "Error" in line or "Exception" in line]
    return f"exit {returncode}: {errors[-1][:300] if errors else 'no error printed'}"


def run_once(index: int, kind: str, rng: random.Random, soak_kafka: SoakKafka, workdir: Path, records: int,
             broker_moments: tuple[str, ...] = BROKER_MOMENTS) -> RunResult:
    kafka = soak_kafka.kafka()
    job_kind = rng.choice(["stream", "backfill"])
    faults = faults_of(kind, rng, broker_moments)
    result = RunResult(index, kind, job_kind, faults, records)
    started = time.monotonic()
    source, sink = kafka.create_topic(3, prefix=f"soak{index}-src"), kafka.create_topic(3, prefix=f"soak{index}-sink")
    sent, result.aborted_records = produce_source(kafka, source, index, records)
    tag = uuid.uuid4().hex[:6]
    group = f"soak-{tag}"
    if job_kind == "stream":
        checkpoint = str(workdir / f"checkpoint-{tag}")
        prefix = derived_prefix(checkpoint)
        command = notebook_command(NOTEBOOKS / "eos_pipeline.py", bootstrap_servers=kafka.bootstrap_servers, source=source, sink=sink,
                                   checkpoint=checkpoint, consumer_group=group, max_offsets_per_trigger=str(max(records // 3, 1)))
        expected = [b"processed:" + (s.value or b"") for s in sent]
    else:
        prefix = f"soak-{tag}"
        command = notebook_command(NOTEBOOKS / "backfill.py", bootstrap_servers=kafka.bootstrap_servers, source=source, sink=sink,
                                   consumer_group=group, prefix=prefix, write_id=f"run-{index}")
        expected = [b"backfilled:" + (s.value or b"") for s in sent]

    markers = Path(os.environ[MARKERS_ENV])
    for marker in markers.iterdir():
        marker.unlink()
    process = next((f for f in faults if not f.startswith("broker")), None)
    process_args, process_marker = process_fault(process) if process else ([], "")
    broker = next((f for f in faults if f.startswith("broker")), None)
    crash: BrokerCrash | None = None
    for attempt in range(MAX_ATTEMPTS):
        extra: list[str] = []
        # Until it fires: a broker crash can fail an attempt before it reaches the fault's point.
        if process and not (markers / process_marker).exists():
            extra = process_args
        crasher: threading.Thread | None = None
        if attempt == 0 and broker:
            role, moment = broker.split(":")[1].split("@")
            moment_args, moment_marker = broker_moment(moment)
            extra = extra or moment_args
            began, after_s = time.monotonic(), rng.uniform(5, 20)
            crash = BrokerCrash(
                when=(lambda: time.monotonic() - began >= after_s) if moment_marker is None else (lambda: (markers / moment_marker).exists()),
                node=lambda: soak_kafka.node_in(role, source if moment == "reading" else sink, group, prefix),
                down_s=rng.uniform(1, 5),
            )
            crasher = threading.Thread(target=crash.run, args=(soak_kafka,))
            crasher.start()
        result.attempts += 1
        try:
            done = subprocess.run(command + extra, capture_output=True, text=True, timeout=JOB_TIMEOUT_S, cwd=PROJECT)
            succeeded = done.returncode == 0
            if not succeeded:
                result.failures.append(why_it_failed(done.returncode, done.stderr))
        except subprocess.TimeoutExpired:
            succeeded = False
            result.failures.append(f"timed out after {JOB_TIMEOUT_S}s")
        if crash is not None and crasher is not None:
            crash.job_done.set()  # a crash not begun by now would come after the job: not a hit
            crasher.join(180)
        if succeeded:
            break
        result.failed_attempts += 1
    result.fired = sorted(m.name for m in markers.iterdir())
    result.hit = (not process or (markers / process_marker).exists()) and (not broker or (crash is not None and crash.killed is not None))
    if crash is not None:
        result.broker_killed = crash.killed
        result.broker_recovery_s = round(crash.recovery_s, 1) if crash.recovery_s is not None else None

    kafka.wait_until_stable(sink, timeout_s=120)
    out = Counter(r.value for r in kafka.read_committed(sink))
    result.output = sum(out.values())
    result.duplicates = sum(n - 1 for n in out.values() if n > 1)
    wanted = set(expected)
    result.lost = len(wanted - set(out))
    result.unexpected = sum(n for value, n in out.items() if value not in wanted)
    result.open_transactions = len(open_transactions_by_kafka(kafka.bootstrap_servers, prefix + "-"))
    for topic in (sink, "_kafka_eos_decisions"):
        stable, written = kafka.offsets(topic, OffsetSpec.latest()), kafka.offsets(topic, OffsetSpec.latest(), committed=False)
        result.unstable_partitions += sum(1 for p in written if stable.get(p) != written[p])
    # The group gets the highest written source offset + 1 (README, consumerGroup): past the last committed
    # record; the aborted transaction and its marker that end each source partition stay after it.
    committed_ends: dict[int, int] = {}
    for record in kafka.read_committed(source):
        committed_ends[record.partition] = max(committed_ends.get(record.partition, 0), record.offset + 1)
    result.group_at_ends = kafka.group_offsets(group, source) == committed_ends
    result.seconds = round(time.monotonic() - started, 1)
    return result


def soak(seed: int, runs: int, max_minutes: float, records: int, workdir: Path, brokers: int = 3,
         kinds: tuple[str, ...] = KINDS, broker_moments: tuple[str, ...] = BROKER_MOMENTS,
         existing: LocalKafka | LocalCluster | None = None) -> list[RunResult]:
    """``runs`` seeded runs on a Kafka of their own (``brokers`` nodes) or on ``existing``, stopping early
    when ``max_minutes`` are used up."""
    rng = random.Random(seed)
    order = kinds_in_turns(rng, runs, kinds)
    os.environ.setdefault(MARKERS_ENV, tempfile.mkdtemp(prefix="soak-markers-"))
    deadline = time.monotonic() + max_minutes * 60
    results: list[RunResult] = []
    with SoakKafka(workdir, brokers, existing) as soak_kafka:
        for index in range(runs):
            if time.monotonic() > deadline:
                break
            result = run_once(index, order[index], rng, soak_kafka, workdir, records, broker_moments)
            results.append(result)
            print(json.dumps({**asdict(result), "ok": result.ok}), flush=True)
    return results


def summary(results: list[RunResult], by: Callable[[RunResult], str] = lambda r: r.kind) -> str:
    """A table of the runs grouped ``by`` (default: fault kind; the JSON lines printed per run say more)."""
    groups: dict[str, list[RunResult]] = {}
    for r in results:
        groups.setdefault(by(r), []).append(r)
    lines = ["| faults | runs | fault hit | ok | records | failed attempts | duplicates | lost | aborted seen | open txns "
             "| LSO<HW partitions | broker back after (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, rs in sorted(groups.items()):
        recoveries = [r.broker_recovery_s for r in rs if r.broker_recovery_s is not None]
        lines.append(f"| {key} | {len(rs)} | {sum(r.hit for r in rs)} | {sum(r.ok for r in rs)} | {sum(r.records for r in rs)} | "
                     f"{sum(r.failed_attempts for r in rs)} | {sum(r.duplicates for r in rs)} | {sum(r.lost for r in rs)} | "
                     f"{sum(r.unexpected for r in rs)} | {sum(r.open_transactions for r in rs)} | {sum(r.unstable_partitions for r in rs)} | "
                     f"{', '.join(f'{x:g}' for x in recoveries) or '-'} |")
    return "\n".join(lines)


def summary_by_fault(results: list[RunResult]) -> str:
    """The runs grouped by their exact faults (``broker:<role>@<moment>``, ``driver@<point>``, ...)."""
    return summary(results, by=lambda r: " + ".join(r.faults))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--max-minutes", type=float, default=60)
    parser.add_argument("--records", type=int, default=600)
    parser.add_argument("--brokers", type=int, default=3, choices=[1, 3], help="a three-node cluster (default) or one broker")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kafka-eos-soak-") as workdir:
        results = soak(args.seed, args.runs, args.max_minutes, args.records, Path(workdir), args.brokers)
    print(summary(results))
    print(summary_by_fault(results))
    failed = [r for r in results if not r.ok]
    print(f"{len(results)} runs, {len(failed)} failed (seed {args.seed})")
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
