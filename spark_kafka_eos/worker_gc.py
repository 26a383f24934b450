"""Keep what a Spark Python worker imported once out of the garbage collection it runs after every task.

pyspark's daemon calls ``gc.collect()`` each time a reused worker finishes a task. A full collection walks every
object the cyclic collector tracks: with pyarrow, pandas, confluent-kafka and this package imported, about
100,000, tens of milliseconds a task. ``gc.freeze()`` moves the objects alive at that moment into a permanent
generation that no later collection walks; objects freed by their reference count are still freed.

The cost: an object alive at the freeze that later becomes unreachable *only through a reference cycle* is not
reclaimed (in this worker process; every worker freezes once, at its first kafka_eos task). What the first task
has alive then is the worker's own state, the modules and the task's input; option ``gcFreeze`` set to ``false``
leaves the collector alone (and unfreezes what this package froze in that worker).
"""

from __future__ import annotations

import gc
import os

_frozen_in_pid: int | None = None


def freeze_worker_heap(enabled: bool) -> None:
    """Once per worker process, when ``enabled``: collect, then freeze what survived. Not ``enabled``: undo a
    freeze of this package's in this process."""
    global _frozen_in_pid
    pid = os.getpid()
    if enabled and _frozen_in_pid != pid:
        gc.collect()
        gc.freeze()
        _frozen_in_pid = pid
    elif not enabled and _frozen_in_pid == pid:
        gc.unfreeze()
        _frozen_in_pid = None
