"""Fault injection for writer tests: a ``kafka_eos_faults`` data source whose writer hooks fail, kill
or stall at a named point. It lives here, not in the package: production code only has the no-op seams
(:class:`spark_kafka_eos._internal.write.hooks.WriterHooks`).

Option ``testing.failAt``:
- ``before_decision`` / ``after_decision`` / ``during_phase2`` raise at that point of the driver's
  commit (``during_phase2`` commits the first participant first); ``<point>:kill-driver`` SIGKILLs
  the driver JVM there instead; ``<point>:pause<seconds>`` only stalls there, and then the commit goes
  on (so that a test can crash a broker at that point of the commit: the marker says when; only the
  first time it fires);
- ``task_write`` makes the first attempt of Spark partition 0 raise after its first Arrow batch;
  ``task_write:kill`` kills its Python worker there; ``task_write:kill-executor`` SIGKILLs the JVM
  that runs it (with ``local-cluster``, an executor of its own); ``task_write:sleep<seconds>`` stalls it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark import TaskContext

from spark_kafka_eos._internal.decision_log.records import LogRecord
from spark_kafka_eos._internal.txn.protocol import TransactionClient
from spark_kafka_eos._internal.txn.session import PreparedTxnState
from spark_kafka_eos._internal.write.hooks import AFTER_DECISION, NO_HOOKS, POINTS, WriterHooks
from spark_kafka_eos.datasource import KafkaEosDataSource
from spark_kafka_eos.errors import KafkaEosError, KafkaEosOptionError

FAULTS_FORMAT = "kafka_eos_faults"
FAIL_AT_OPTION = "testing.failAt"
FAIL_AT_ENV = "KAFKA_EOS_TESTING_FAIL_AT"
"""``testing.failAt`` for a job whose code sets no such option (a notebook run by the notebook runner)."""
TASK_POINT = "task_write"
REPO_ROOT = Path(__file__).resolve().parents[2]
MARKERS_ENV = "KAFKA_EOS_FAULT_MARKERS"
"""A directory where every fault that fires leaves a file named after its point (inherited by Spark's
Python workers and by the pipeline job's subprocess), so that a test can prove its fault fired."""


class InjectedFault(KafkaEosError):
    """Raised where ``testing.failAt`` asks for it."""


@dataclass(frozen=True)
class FaultHooks(WriterHooks):
    point: str
    mode: str = ""

    @classmethod
    def parse(cls, spec: str) -> FaultHooks:
        point, _, mode = spec.partition(":")
        if point not in POINTS + (TASK_POINT,):
            raise KafkaEosOptionError(FAIL_AT_OPTION, f"is {spec!r}.", f"use one of {', '.join(POINTS + (TASK_POINT,))}.")
        return cls(point, mode)

    def at(self, point: str, session: TransactionClient, decision: LogRecord) -> None:
        if point != self.point:
            return
        if point == "during_phase2":
            session.commit(decision.participants[0].txn)
        fault = f"{point}:{self.mode}" if self.mode else point
        first = not fired(fault) if os.environ.get(MARKERS_ENV) else True
        mark_fired(fault, decision.epoch_id)
        if self.mode.startswith("pause"):
            if first:
                time.sleep(float(self.mode[len("pause"):]))
            return
        if self.mode == "kill-driver":
            kill_parent_jvm()  # the driver's: commits run in a Python worker of the driver
        raise InjectedFault(f"Injected fault at {point} (testing.failAt)")

    def task_input(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _fail_after_first_batch(batches, self.mode) if self.point == TASK_POINT else batches


@dataclass(frozen=True)
class AbortAfterDecision(WriterHooks):
    """Aborts one prepared transaction right after the decision is written. ``fence``: by InitProducerId with its
    producer id and epoch, which bumps the epoch as the broker's own timeout abort does (phase 2's EndTxn(commit) is
    then refused as PRODUCER_FENCED); else by EndTxn(abort), as another actor would (the epoch stays: INVALID_TXN_STATE)."""

    victim: PreparedTxnState
    fence: bool = False

    def at(self, point: str, session: TransactionClient, decision: LogRecord) -> None:
        if point != AFTER_DECISION:
            return
        if self.fence:
            session.init_producer_id(self.victim.transactional_id, 60_000, self.victim.producer_id, self.victim.producer_epoch)
        else:
            session.abort(self.victim)


class FaultInjectingDataSource(KafkaEosDataSource):
    """``format("kafka_eos_faults")``: kafka_eos with :class:`FaultHooks` from ``testing.failAt``."""

    @classmethod
    def name(cls) -> str:
        return FAULTS_FORMAT

    def writer_hooks(self) -> WriterHooks:
        spec = self.options.get(FAIL_AT_OPTION) or os.environ.get(FAIL_AT_ENV)
        return FaultHooks.parse(spec) if spec else NO_HOOKS


def _fail_after_first_batch(batches: Iterator[pa.RecordBatch], mode: str) -> Iterator[pa.RecordBatch]:
    context = TaskContext.get()
    doomed = context is not None and context.partitionId() == 0 and context.attemptNumber() == 0
    for index, batch in enumerate(batches):
        if doomed and index == 1:
            mark_fired(f"{TASK_POINT}:{mode}" if mode else TASK_POINT, str(context.taskAttemptId()) if context else "")
            if mode.startswith("sleep"):
                time.sleep(float(mode[len("sleep"):]))
                doomed = False
                yield batch
                continue
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if mode == "kill-executor":
                kill_parent_jvm()
            raise InjectedFault("Injected fault in a task after its first batch (testing.failAt)")
        yield batch


def mark_fired(fault: str, detail: str) -> None:
    directory = os.environ.get(MARKERS_ENV)
    if directory:
        with open(Path(directory) / fault.replace(":", "_"), "a") as marker:
            marker.write(detail + "\n")


def fired(fault: str) -> list[str]:
    """The details of each time ``fault`` fired in this test session (empty if it never did)."""
    marker = Path(os.environ[MARKERS_ENV]) / fault.replace(":", "_")
    return marker.read_text().split() if marker.exists() else []


def clear_fired() -> None:
    for marker in Path(os.environ[MARKERS_ENV]).iterdir():
        marker.unlink()


SPARK_JVM_MAIN_CLASSES = (b"org.apache.spark.deploy.SparkSubmit", b"org.apache.spark.executor.")


def kill_parent_jvm() -> None:
    """SIGKILL the Spark JVM this Python worker descends from (a driver, or an executor): a real crash. Only a JVM
    whose command line names Spark's driver or executor main class is killed, never another JVM (a test's broker);
    the victim is named on stderr, which a failing test prints."""
    pid = os.getpid()
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
        if any(main_class in command_line for main_class in SPARK_JVM_MAIN_CLASSES):
            print(f"testing.failAt: SIGKILL of Spark's JVM, pid {pid}, from Python worker {os.getpid()}", file=sys.stderr, flush=True)
            os.kill(pid, signal.SIGKILL)
            os._exit(1)
    raise InjectedFault("testing.failAt asked to kill a JVM, but this Python worker descends from no Spark JVM")


def make_importable_by_workers() -> None:
    """Spark's Python workers unpickle the data source class by reference: let them import ``tests``."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO_ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *paths])
