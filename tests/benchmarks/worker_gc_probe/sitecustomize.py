"""Put on the Python workers' ``PYTHONPATH`` by ``BENCH_WORKER_GC=1``: times every ``gc.collect()`` a Spark Python
worker runs (pyspark's daemon runs one after each call it serves) and appends a line per collection to the file
``KAFKA_EOS_GC_PROBE_LOG`` names: the worker's kind (pyspark's module it serves), the objects the collection walks,
the frozen ones, and its milliseconds. Benchmark scaffolding: never shipped."""

from __future__ import annotations

import gc
import os
import sys
import time

_LOG = os.environ.get("KAFKA_EOS_GC_PROBE_LOG")
_collect = gc.collect


def _timed_collect(generation: int = 2) -> int:
    walked = len(gc.get_objects())
    started = time.perf_counter()
    found = _collect(generation)
    ms = (time.perf_counter() - started) * 1000
    if _LOG:
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(f"{sys.argv[-1]}\t{os.getpid()}\t{walked}\t{gc.get_freeze_count()}\t{ms:.2f}\n")
    return found


if _LOG:
    gc.collect = _timed_collect
