"""What a stream's commit leaves to a thread of its process once phase 2 and the sweep are done: the decision's
completion record. It changes nothing visible and is safe to lose (the next operation on the prefix, in any process,
rolls a decision without its completion forward again, which finds its participants committed). Every coordinator
operation of the process waits for it first, so that no two use the coordinator's producer at once. The sweep stays
in the commit: the next epoch's tasks open their transactions as soon as the commit returns."""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

EXIT_WAIT_S = 10.0
"""How long a process that exits waits for its afterwork (a broker away could hold it for minutes)."""


class Afterwork:
    """Threads of this process running the end of a commit; :meth:`wait` joins them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self, work: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=self._run, args=(work, name), name=f"kafka-eos-afterwork-{name}", daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    @staticmethod
    def _run(work: Callable[[], None], name: str) -> None:
        try:
            work()
        except Exception:  # noqa: BLE001 - nothing visible depends on it: the next operation redoes it
            log.warning("The end of commit %s failed; the prefix's next operation finishes it", name, exc_info=True)

    def pending(self) -> int:
        """Threads started and not waited for yet (finished or not)."""
        with self._lock:
            return len(self._threads)

    def wait(self, timeout_s: float | None = None) -> None:
        with self._lock:
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(timeout_s)


AFTERWORK = Afterwork()
atexit.register(AFTERWORK.wait, EXIT_WAIT_S)
