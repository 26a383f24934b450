"""A dead man's switch for the transactions a Python worker holds open.

Spark kills the Python worker of an interrupted task (``query.stop()``, a cancelled job, the losing copy
of a speculative task) with SIGKILL, so the task cannot abort its own transaction, and the driver's
``abort()`` often fails on its interrupted thread. Left open, the transaction would pin the sink's last
stable offset until its timeout (the broker's maximum, 15 minutes by default).

So each worker that opens a transaction starts one small guard process beside it (stdlib only while it
waits, see :mod:`spark_kafka_eos._internal.write.transaction_guard_process`) and tells it, over a pipe, which
transactions are open and which it has handed to the driver. When the pipe closes with a transaction still
open, the worker died before handing it over: nobody will decide it, and the guard aborts it by its exact
producer id and epoch.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_kafka_eos._internal.config.connection import KafkaConnection

log = logging.getLogger(__name__)

_GUARD_SCRIPT = Path(__file__).with_name("transaction_guard_process.py")
# Run by path: ``-m`` would import the package (and pyspark) into every idle guard.
_LAUNCH = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"


class TransactionGuard:
    """The worker's side: reports transactions opened, identified and handed over. Never raises: without a
    guard, an abandoned transaction is still aborted by the driver's next sweep or by its timeout."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._broken = False

    def opened(self, connection: KafkaConnection, transactional_id: str) -> None:
        self._send({"op": "open", "id": transactional_id, "bootstrap_servers": connection.bootstrap_servers,
                    "settings": list(connection.settings)})

    def identified(self, transactional_id: str, producer_id: int, producer_epoch: int) -> None:
        """The open transaction's producer id and epoch: the guard then aborts that transaction only."""
        self._send({"op": "identity", "id": transactional_id, "producer_id": producer_id, "producer_epoch": producer_epoch})

    def released(self, transactional_id: str) -> None:
        """Handed to the driver (or aborted here): no longer the guard's business."""
        self._send({"op": "release", "id": transactional_id})

    def _send(self, message: dict[str, Any]) -> None:
        line = (json.dumps(message) + "\n").encode()
        with self._lock:
            if self._broken:
                return
            try:
                if self._process is None or self._process.poll() is not None:
                    # The worker's own import path: Spark adds the job's files to sys.path, not to PYTHONPATH.
                    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
                    self._process = subprocess.Popen([sys.executable, "-c", _LAUNCH, str(_GUARD_SCRIPT)],
                                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                                     start_new_session=True, env=env)
                assert self._process.stdin is not None
                self._process.stdin.write(line)
                self._process.stdin.flush()
            except OSError as err:
                self._broken = True
                log.warning("No transaction guard in this worker (%s): a task killed with its transaction open "
                            "leaves it to the driver's next sweep or its timeout", err)


_GUARD = TransactionGuard()


def worker_guard() -> TransactionGuard:
    """This process's guard."""
    return _GUARD


@dataclass(frozen=True)
class Abandoned:
    """A transaction the worker opened and never handed over, as the guard heard of it."""

    transactional_id: str
    connection: KafkaConnection
    producer_id: int | None = None
    producer_epoch: int | None = None

    @classmethod
    def of(cls, opened: dict[str, Any]) -> Abandoned:
        return cls(opened["id"], KafkaConnection(opened["bootstrap_servers"], tuple((k, v) for k, v in opened["settings"])),
                   opened.get("producer_id"), opened.get("producer_epoch"))


def abort_abandoned(abandoned: list[Abandoned]) -> list[str]:
    """Abort each transaction still open with the identity the worker had. A worker reports its identity
    before it produces anything, so one that died without reporting it opened no transaction: the id's
    open transaction, if any, is another attempt's that took the id since, and is left alone.
    Returns the ids aborted."""
    from spark_kafka_eos._internal.cluster import cached_session
    from spark_kafka_eos._internal.txn.session import TxnState
    from spark_kafka_eos._internal.write.recovery import abort_prepared

    aborted = []
    for txn in abandoned:
        try:
            session = cached_session(txn.connection)
            if txn.producer_id is None:
                continue
            now = session.describe([txn.transactional_id])[txn.transactional_id]
            if now.state != TxnState.ONGOING or (now.producer_id, now.producer_epoch) != (txn.producer_id, txn.producer_epoch):
                continue
            abort_prepared(session, [now.prepared_state()])
            aborted.append(txn.transactional_id)
        except Exception as err:  # noqa: BLE001 - the guard's last act: report, then go on with the next
            log.warning("Could not abort %s, abandoned by a killed task (%s): the driver's next sweep or its "
                        "timeout aborts it", txn.transactional_id, err)
    return aborted
