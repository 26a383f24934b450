"""A session broker that something outside the tests SIGKILLs is restarted on its data directory, and its death
is told loudly.

Twice in clean-clone runs a pytest worker's session broker died with no line in its log (a SIGKILL) while no test
meant to touch it: every later test of that worker then failed. No code of ours or of the tests sends it a signal
(each broker runs in a session of its own; fault hooks kill only Spark's JVMs). This machine's ``pid_max`` is 32768
and the suite's JVMs burn through pids fast, so a SIGKILL by a stale pid (pyspark's daemon kills a worker by the pid
its JVM hands it) is the suspect; it is not proven. Restarting the broker is what a crash test does anyway (a broker
SIGKILLed and restarted on its data directory), so the tests in flight meet a real broker crash, which the sink must
survive and the judges still count; the tests after it start on a serving broker.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.harness.local_kafka import LocalKafka

POLL_S = 0.2


class BrokerWatchdog:
    """Watches ``broker`` from a thread: when its process ends while not :meth:`stop`-ped, it writes what it saw
    to ``report`` (the time, the exit code, the processes alive then), says so on the real stderr, and starts the
    broker again on its data directory and ports."""

    def __init__(self, broker: LocalKafka, report: Path) -> None:
        self._broker = broker
        self._report = report
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="broker-watchdog", daemon=True)
        self.restarts = 0

    def start(self) -> BrokerWatchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=120)

    def _watch(self) -> None:
        while not self._stopping.wait(POLL_S):
            ended = self._broker.ended()
            if ended is None:
                continue
            self._tell(*ended)
            if self._stopping.is_set():
                return
            self._broker.start()
            self.restarts += 1

    def _tell(self, pid: int, code: int) -> None:
        processes = subprocess.run(["ps", "-eo", "pid,ppid,pgid,etimes,args", "--sort=-etimes"], capture_output=True, text=True).stdout
        what = (f"{time.strftime('%Y-%m-%d %H:%M:%S')}: the session broker on {self._broker.bootstrap_servers} (pid {pid}) "
                f"ended with code {code} while no test meant to stop it; restarting it on {self._broker.data_dir}")
        with self._report.open("a") as report:
            report.write(f"{what}\nprocesses then:\n{processes}\n")
        print(f"\nWARNING {what} (processes then: {self._report})", file=sys.__stderr__, flush=True)
