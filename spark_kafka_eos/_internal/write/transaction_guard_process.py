"""The guard process of :mod:`spark_kafka_eos._internal.write.transaction_guard`. It imports only the standard
library while it waits (an idle guard costs a few MB), and the package only when its worker died with a
transaction open."""

from __future__ import annotations

import json
import logging
import signal
import sys
from typing import Any


def _listen() -> dict[str, dict[str, Any]]:
    """The worker's messages until the pipe closes; returns the transactions still open then."""
    open_transactions: dict[str, dict[str, Any]] = {}
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if message["op"] == "open":
            open_transactions[message["id"]] = message
        elif message["op"] == "identity" and message["id"] in open_transactions:
            open_transactions[message["id"]].update(producer_id=message["producer_id"], producer_epoch=message["producer_epoch"])
        elif message["op"] == "release":
            open_transactions.pop(message["id"], None)
    return open_transactions


def main() -> None:
    # Not the worker's signals: the guard outlives it, to abort what it left open, and then exits.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    left_open = _listen()
    if not left_open:
        return
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from spark_kafka_eos._internal.write.transaction_guard import Abandoned, abort_abandoned

    aborted = abort_abandoned([Abandoned.of(m) for m in left_open.values()])
    if aborted:
        logging.getLogger("spark_kafka_eos._internal.write.transaction_guard").warning(
            "Aborted the transactions of killed tasks, which nobody could have committed: %s", ", ".join(aborted))


if __name__ == "__main__":
    main()
