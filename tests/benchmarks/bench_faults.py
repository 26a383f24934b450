"""How soon a stream delivers again after a fault: kafka_eos's exactly-once pipeline beside Spark's own
(``format("kafka")`` at both ends), each through the same fault proxy, one after the other, the same fault.

Each run: a pipeline from a 4-partition topic to another, fed 500 records a second on the broker's direct listener,
every connection of the pipeline through the proxy; once it delivers, the fault; then the time from the fault's end
to the first record sent after it that an independent read_committed consumer sees. Median of ``BENCH_ROUNDS``.

    make bench-faults                                   # every fault below, 3 rounds
    BENCH_FAULTS="outage:2,crash" BENCH_ROUNDS=1 make bench-faults
    BENCH_ENGINE=python make bench-faults               # kafka_eos's pure-Python read and write paths

Faults (``BENCH_FAULTS``, comma-separated): ``outage:<s>`` (every connection reset and new ones refused for <s>
seconds), ``reset`` (every open connection reset once), ``blackhole:<request>`` (the next such request reaches the
broker, its answer never the client; the connection stalls 5 s, then is reset: ``Produce`` is the sink's,
``Fetch`` the reader's, ``EndTxn/coordinator`` the decision log's, kafka_eos only), ``crash`` (the broker killed -9,
restarted on its data after 1 s; measured from when it serves again).

An outage or a reset may be of one part's connections only, ``@sink``, ``@reader`` or ``@decisions`` (kafka_eos
only: its coordinator's producer and its transaction session), told by their client ids: ``outage:2@reader``.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

from tests.benchmarks.common import bench_spark, connector_jars
from tests.harness.fault_schedule import BLACKHOLE_RESPONSE, OUTAGE, RESET, Fault
from tests.harness.liveness import CRASH, EXACTLY_ONCE, PART_CLIENTS, SPARKS, FaultRun, through_fault
from tests.harness.proxied_kafka import ProxiedKafka

DEFAULT_FAULTS = ("outage:2,outage:10,outage:2@sink,outage:2@reader,outage:2@decisions,reset,reset@sink,reset@reader,"
                  "reset@decisions,blackhole:Produce,blackhole:Fetch,blackhole:EndTxn/coordinator,crash")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
STALL_S = float(os.environ.get("BENCH_STALL_S", "60"))
ENGINE = os.environ.get("BENCH_ENGINE", "auto")


def parse_fault(text: str, system: str) -> Fault | str | None:
    """``text``'s fault for ``system``; None where the system has no such part."""
    text, _, part = text.strip().partition("@")
    clients = PART_CLIENTS.get((system, part)) if part else None
    if part and clients is None:
        if any(p == part for _, p in PART_CLIENTS):
            return None
        sys.exit(f"BENCH_FAULTS names a part {part!r}. Fix: @sink, @reader or @decisions")
    kind, _, argument = text.partition(":")
    if kind == "outage":
        return Fault(0.0, OUTAGE, float(argument or 2), clients=clients)
    if kind == "reset":
        return Fault(0.0, RESET, scope="all", clients=clients)
    if kind == "blackhole" and argument:
        return None if system == SPARKS and "coordinator" in argument else Fault(0.0, BLACKHOLE_RESPONSE, 5.0, apis=(argument,))
    if kind == CRASH:
        return CRASH
    sys.exit(f"BENCH_FAULTS names {text!r}. Fix: outage:<seconds>, reset, blackhole:<request>[/<client id part>] or crash")


def shown(runs: list[FaultRun]) -> str:
    backs = [r.back_s for r in runs if r.back_s is not None]
    stalls = len(runs) - len(backs)
    text = f"{statistics.median(backs):6.2f} s" if backs and not stalls else "STALLED" if not backs else \
        f"{statistics.median(backs):6.2f} s ({stalls} stalled)"
    worse = [f"{r.visible}/{r.sent} visible{', ' + '; '.join(r.problems) if r.problems else ''}"
             f"{', stop() hung' if r.stop_s is None else ''}{', failed' if r.failure else ''}"
             f"{', the fault reached no connection' if r.reached == 0 else ''}"
             for r in runs if r.problems or r.stop_s is None or r.failure or r.reached == 0]
    return text + (f"  [{' | '.join(worse)}]" if worse else "")


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    faults = [f.strip() for f in os.environ.get("BENCH_FAULTS", DEFAULT_FAULTS).split(",") if f.strip()]
    for text in faults:
        parse_fault(text, EXACTLY_ONCE)  # a typo ends the run before anything starts
    spark = bench_spark("bench-faults", connector_jars())
    workdir = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    broker = ProxiedKafka(workdir / "kafka").start()
    print(f">> pyspark {spark.version}, local[2]; kafka_eos's engine {ENGINE}; 4 partitions, 500 records/s; median of {ROUNDS} round(s); "
          "seconds from the fault's end to the first record sent after it, visible")
    print(f"{'fault':<58} {'kafka_eos':>12} {'Spark':>12} {'ratio':>6}")
    try:
        for text in faults:
            of = {system: parse_fault(text, system) for system in (EXACTLY_ONCE, SPARKS)}
            systems = [system for system, fault in of.items() if fault is not None]
            runs: dict[str, list[FaultRun]] = {s: [] for s in systems}
            for _ in range(ROUNDS):
                for system in systems:
                    fault = of[system]
                    assert fault is not None
                    runs[system].append(through_fault(spark, broker, system, fault, workdir, stall_s=STALL_S,
                                                               engine=ENGINE))
            ours = [r.back_s for r in runs[EXACTLY_ONCE] if r.back_s is not None]
            theirs = [r.back_s for r in runs.get(SPARKS, []) if r.back_s is not None]
            ratio = (f"{statistics.median(ours) / statistics.median(theirs):6.2f}"
                     if ours and theirs and statistics.median(theirs) > 0 else "     -")
            print(f"{text[:58]:<58} {shown(runs[EXACTLY_ONCE]):>12} {shown(runs[SPARKS]) if SPARKS in runs else '-':>12} {ratio}",
                  flush=True)
    finally:
        broker.kill()
        spark.stop()


if __name__ == "__main__":
    main()
