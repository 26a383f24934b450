"""Keep what a Spark Python worker imported out of the garbage collection it runs after every call.

pyspark's daemon calls ``gc.collect()`` each time a reused worker finishes a task, and so does every worker it
forks for the driver's Python calls (the schema, the read planning, the writer's creation, the commit of a batch or
of a micro-batch). A full collection walks every object the cyclic collector tracks: with pyarrow, pandas,
confluent-kafka and this package imported, 60,000 to 100,000, tens of milliseconds a call. ``gc.freeze()`` moves
the objects alive at that moment into a permanent generation that no later collection walks; objects freed by
their reference count are still freed.

The package freezes a worker's heap at its first kafka_eos call, and again at a later call when the worker has
imported modules since (pyspark imports pandas lazily, during a worker's first task): at most once per call that
finds new modules, so a worker freezes a handful of times in its life. The cost: an object alive at a freeze that
later becomes unreachable *only through a reference cycle* is not reclaimed in that worker. Option ``gcFreeze`` set
to ``false`` leaves the collector alone (and unfreezes what this package froze in that worker).
"""

from __future__ import annotations

import gc
import os
import sys

_frozen_in_pid: int | None = None
_modules_at_freeze = 0


def freeze_worker_heap(enabled: bool) -> None:
    """A task's start, when ``enabled``: collect, then freeze what survived, if this worker process has not
    frozen yet or has imported modules since its last freeze. Not ``enabled``: undo this package's freezes in
    this process."""
    global _frozen_in_pid, _modules_at_freeze
    pid = os.getpid()
    if not enabled:
        if _frozen_in_pid == pid:
            gc.unfreeze()
            _frozen_in_pid = None
        return
    modules = len(sys.modules)
    if _frozen_in_pid == pid and modules <= _modules_at_freeze:
        return
    gc.collect()
    gc.freeze()
    _frozen_in_pid, _modules_at_freeze = pid, modules


def freeze_driver_call_heap(enabled: bool) -> None:
    """As :func:`freeze_worker_heap`, at the end of a call Spark makes in a Python worker for the driver (the
    schema, planning, the writer's creation, a commit), but only inside a worker forked by pyspark's daemon:
    the same calls made in a user's own Python process (a test, a notebook calling them by hand) leave its
    collector alone."""
    if _in_pyspark_daemon_worker():
        freeze_worker_heap(enabled)


def _in_pyspark_daemon_worker() -> bool:
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(main_spec, "name", None) == "pyspark.daemon"
