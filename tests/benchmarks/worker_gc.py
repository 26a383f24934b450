"""``BENCH_WORKER_GC=1``: what the Spark Python workers' garbage collections cost during a benchmark run.

pyspark's daemon runs ``gc.collect()`` after every call a reused worker serves: each task, and each of the driver's
calls Spark makes in a Python worker (the schema, the read planning, the writer's creation, a commit). The probe
(``worker_gc_probe/sitecustomize.py``, on the workers' ``PYTHONPATH``) times each collection; :func:`report`
prints, per kind of worker, the collections, the objects they walked and their milliseconds. The collections that
:mod:`spark_kafka_eos._internal.worker_gc`'s own freezes run are among them (a few per worker)."""

from __future__ import annotations

import os
import statistics
from collections import defaultdict
from pathlib import Path

PROBE_DIR = Path(__file__).parent / "worker_gc_probe"


def enable(log: Path) -> bool:
    """With ``BENCH_WORKER_GC=1``, before Spark starts: the workers it forks will time their collections into ``log``."""
    if os.environ.get("BENCH_WORKER_GC") != "1":
        return False
    os.environ["KAFKA_EOS_GC_PROBE_LOG"] = str(log)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROBE_DIR), os.environ.get("PYTHONPATH", "")) if p)
    return True


def report(log: Path) -> None:
    """Per worker kind: collections, median objects walked, median and total ms."""
    walked: dict[str, list[int]] = defaultdict(list)
    ms: dict[str, list[float]] = defaultdict(list)
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    for line in lines:
        kind, _pid, objects, _frozen, took = line.split("\t")
        walked[kind].append(int(objects))
        ms[kind].append(float(took))
    print(">> the Python workers' garbage collections (BENCH_WORKER_GC=1), per kind of worker:")
    for kind in sorted(ms):
        print(f"   {kind:<55} {len(ms[kind]):5d} collections  median {statistics.median(walked[kind]):9,.0f} objects walked  "
              f"median {statistics.median(ms[kind]):7.2f} ms  total {sum(ms[kind]):8.0f} ms")
