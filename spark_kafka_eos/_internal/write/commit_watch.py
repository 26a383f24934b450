"""A commit that takes too long is seen: the driver logs what it waits for, again and again until it ends.

A commit normally takes tens of milliseconds. One that waits on the cluster (a network outage, a coordinator that
moves) is bounded by its calls' timeouts, but until it ends Spark's progress shows nothing: :func:`watched` logs a
warning every :data:`STUCK_COMMIT_S` naming the innermost calls of the package the commit is in, so that an operator
sees which request it waits for. The exporter shows the same wait from outside, as the age of the prefix's oldest
open transaction (``kafka_eos_prefix_oldest_open_transaction_age_seconds``): the tasks' transactions stay open until
the commit decides them.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

log = logging.getLogger(__name__)

STUCK_COMMIT_S = 20.0
_PACKAGE = "spark_kafka_eos"


@contextmanager
def watched(what: str, every_s: float = STUCK_COMMIT_S) -> Iterator[None]:
    """Run the body; while it runs longer than ``every_s``, log every ``every_s`` what ``what`` waits in."""
    thread = threading.get_ident()
    started = time.monotonic()
    done = threading.Event()

    def watch() -> None:
        while not done.wait(every_s):
            log.warning("%s has taken %.1fs so far; it waits in %s", what, time.monotonic() - started,
                        waiting_in(sys._current_frames().get(thread)))

    watcher = threading.Thread(target=watch, name="kafka-eos-commit-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()


def waiting_in(frame: FrameType | None, depth: int = 4) -> str:
    """The innermost ``depth`` calls of the package on the stack of ``frame``, innermost first."""
    calls: list[str] = []
    while frame is not None and len(calls) < depth:
        if frame.f_globals.get("__name__", "").startswith(_PACKAGE):
            code = frame.f_code
            calls.append(f"{getattr(code, 'co_qualname', code.co_name)} ({code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno})")
        frame = frame.f_back
    return " <- ".join(calls) or "no call of the package"
