"""Kafka's own command-line tools, run from the broker jars (``make kafka-jars`` resolves kafka-tools):
the tests' judges that share no code with the package.

- :func:`open_transactions_by_kafka` is ``kafka-transactions list``: which transactions of a prefix the
  coordinators still hold open. ``kafka-transactions`` runs in one JVM kept for the session
  (``KafkaToolServer.java`` calls the command's own code), not a JVM per call.
- :func:`console_produce` is ``kafka-console-producer``: the Java client's default partitioner.
- :func:`assert_stable` checks that the last stable offset equals the high watermark: nothing open pins
  the topic.
"""

from __future__ import annotations

import atexit
import subprocess
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from tests.harness.kafka import KafkaTestCluster
from tests.harness.local_kafka import DEFAULT_LIBS_DIR, java_executable

CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
DECIDED_STATES = {"Empty", "CompleteCommit", "CompleteAbort", "Dead"}
"""States of a transactional id with no transaction in flight (anything else pins partitions)."""
COMPLETING_STATES = {"PrepareCommit", "PrepareAbort"}
"""States of a decided transaction whose markers the coordinator is still writing."""


def run_kafka_tool(main_class: str, *args: str, stdin: str = "", timeout_s: float = 120.0) -> str:
    """Run one of Kafka's command-line classes; its standard output, or an error with its stderr."""
    if not any(DEFAULT_LIBS_DIR.glob("kafka-tools-*.jar")):
        raise FileNotFoundError(f"kafka-tools is not in {DEFAULT_LIBS_DIR}: run `make kafka-jars`.")
    command = [java_executable(), "-Xmx256m", "-cp", f"{DEFAULT_LIBS_DIR}/*", main_class, *args]
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"{main_class} {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


class _TransactionsCommandServer:
    """``kafka-transactions``, Kafka's own code, in one JVM kept for the test session
    (``KafkaToolServer.java``): a JVM start per call cost about two seconds."""

    SOURCE = Path(__file__).with_name("KafkaToolServer.java")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None

    def run(self, *args: str, timeout_s: float = 120.0) -> str:
        with self._lock:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            watchdog = threading.Timer(timeout_s, process.kill)
            watchdog.start()
            try:
                process.stdin.write("\t".join(args) + "\n")
                process.stdin.flush()
                lines = []
                while not (line := process.stdout.readline()).startswith("\0"):
                    if not line:
                        raise RuntimeError(f"kafka-transactions {' '.join(args)}: the tool's JVM died (or took over {timeout_s:g}s)")
                    lines.append(line)
            finally:
                watchdog.cancel()
            if line.strip("\0\n") != "0":
                raise RuntimeError(f"kafka-transactions {' '.join(args)} failed: {''.join(lines)[-2000:]}")
            return "".join(lines)

    def _started(self) -> subprocess.Popen[str]:
        if self._process is None or self._process.poll() is not None:
            if not any(DEFAULT_LIBS_DIR.glob("kafka-tools-*.jar")):
                raise FileNotFoundError(f"kafka-tools is not in {DEFAULT_LIBS_DIR}: run `make kafka-jars`.")
            self._process = subprocess.Popen(
                [java_executable(), "-Xmx256m", "-cp", f"{DEFAULT_LIBS_DIR}/*", str(self.SOURCE)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
            atexit.register(self._process.kill)
        return self._process


_TRANSACTIONS = _TransactionsCommandServer()


def kafka_transactions(*args: str) -> str:
    """``kafka-transactions <args>``: its standard output, or an error with its output."""
    return _TRANSACTIONS.run(*args)


def transactions_by_kafka(bootstrap_servers: str, prefix: str) -> dict[str, str]:
    """``kafka-transactions list``: the state of every transactional id that starts with ``prefix``."""
    # No --transactional-id-pattern: brokers before Kafka 4.1 (ListTransactions v2) refuse it.
    listing = kafka_transactions("--bootstrap-server", bootstrap_servers, "list")
    rows = [line.split() for line in listing.splitlines()[1:] if line.strip()]
    # Columns: TransactionalId, Coordinator, ProducerId, TransactionState.
    return {row[0]: row[3] for row in rows if row[0].startswith(prefix)}


def open_transactions_by_kafka(bootstrap_servers: str, prefix: str, settle_s: float = 15.0) -> list[str]:
    """The transactional ids of ``prefix`` whose transaction Kafka still holds open, sorted.

    A transaction in ``PrepareCommit`` or ``PrepareAbort`` is decided: EndTxn has returned and the
    coordinator writes its markers on its own. Such a state is listed again (for up to ``settle_s``) until
    it completes, so a judge called just after a commit does not count it as open; one that never
    completes is reported open.
    """
    deadline = time.monotonic() + settle_s
    while True:
        states = transactions_by_kafka(bootstrap_servers, prefix)
        if not any(state in COMPLETING_STATES for state in states.values()) or time.monotonic() > deadline:
            return sorted(tid for tid, state in states.items() if state not in DECIDED_STATES)
        time.sleep(0.2)


def console_produce(bootstrap_servers: str, topic: str, keyed_values: Iterable[tuple[str, str]]) -> None:
    """Produce ``key\\tvalue`` lines with Kafka's console producer (the Java client's partitioner)."""
    lines = "".join(f"{key}\t{value}\n" for key, value in keyed_values)
    run_kafka_tool(
        CONSOLE_PRODUCER, "--bootstrap-server", bootstrap_servers, "--topic", topic,
        "--property", "parse.key=true", "--property", "key.separator=\t", stdin=lines,
    )


def assert_stable(kafka: KafkaTestCluster, *topics: str) -> None:
    """Every partition's last stable offset equals its high watermark: no open transaction pins it."""
    for topic in topics:
        stable = kafka.offsets(topic, OffsetSpec.latest())
        written = kafka.offsets(topic, OffsetSpec.latest(), committed=False)
        assert stable == written, f"{topic}: the last stable offsets {stable} are behind the high watermarks {written}"


def group_offsets(kafka: KafkaTestCluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets, as an independent consumer sees them."""
    reader = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in reader.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)}
    finally:
        reader.close()
