"""Per-micro-batch time and end-to-end latency of kafka_eos, against Spark's own Kafka connector.

    make bench-latency                          # 2, 8, 32 and 64 partitions, 3 rounds, 12 batches each; then end to end
    BENCH_PARTITIONS=8 BENCH_ROUNDS=5 make bench-latency
    BENCH_SYSTEMS="kafka_eos,kafka" BENCH_E2E_SECONDS=0 make bench-latency     # two systems, no end-to-end part
    BENCH_SYSTEMS="kafka_eos; kafka_eos, gcFreeze=false" make bench-latency   # ';' between labels holding a ','
    BENCH_REQUESTS=1 BENCH_E2E_SECONDS=0 make bench-latency   # and the broker requests each system sends a micro-batch
    BENCH_WORKER_GC=1 BENCH_E2E_SECONDS=0 make bench-latency  # and what the Python workers' garbage collections cost

Part 1, micro-batches: streaming queries of 300 records per micro-batch (``maxOffsetsPerTrigger``,
``Trigger.AvailableNow``), alternating over the rounds on the same source topic, each run into a new sink topic
with a new checkpoint:

- the whole pipeline, ``format("kafka_eos")`` at both ends (as is; with ``gcFreeze=false``; with one task a Kafka
  partition, ``minRecordsPerPartition=0``) against ``format("kafka")`` at both ends (Spark's JVM, at-least-once);
- the sink alone: the kafka_eos source into Spark's Kafka sink and into the ceiling (a Python sink that drops its
  input: what any Python data source pays per micro-batch);
- the Python floor: a Python stream source that reads no Kafka (pre-built rows, one Spark partition) into the
  ceiling sink: what Spark's machinery for a Python source and sink costs a micro-batch by itself, so that
  kafka_eos's own part is its time less the floor's.

A batch's time is Spark's ``triggerExecution`` duration; the first batch of each run (planning, Python worker
start) is left out. Each run's output is counted with an independent read_committed consumer (the ceiling's by its
commits) and must equal its input.

Part 2, end to end: records produced at a fixed rate (``BENCH_E2E_RATE`` a second for ``BENCH_E2E_SECONDS``, the
production time in each value) through a default-trigger query (``processingTime`` 0: the next micro-batch starts
when the last ends), kafka_eos at both ends against Spark's connector at both ends, one after the other; the latency
of a record is when an independent read_committed consumer of the sink topic receives it, less its production time.
Production starts once the query's first micro-batch has ended; the first ``BENCH_E2E_WARMUP_SECONDS`` of records are
left out. ``BENCH_E2E_ROUNDS`` (default ``BENCH_ROUNDS``) alternating rounds; each prints its latencies and the
micro-batches that started after the warm-up (Spark's ``triggerExecution`` and rows), and the goal's figure is the
median over the rounds of each system's p99. ``BENCH_E2E_RATE`` may list rates (``5000,10000,20000``): each is
measured in turn, and the run ends with the ratio at each rate and the two rates between which it crosses 1.0.
"""

from __future__ import annotations

import os
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.benchmarks import worker_gc
from tests.benchmarks.broker_requests import RequestTally
from tests.benchmarks.ceiling import CEILING_SINK, CEILING_STREAM_SOURCE, DiscardingSink, StreamCeilingSource
from tests.benchmarks.common import bench_spark, bootstrap_servers, check_count, connector_jars, count_committed, request_log
from tests.benchmarks.common import produce as produce_one

ROWS_PER_BATCH = 300
BATCHES = int(os.environ.get("BENCH_BATCHES", "12"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
PARTITION_COUNTS = [int(p) for p in os.environ.get("BENCH_PARTITIONS", "2,8,32,64").split(",")]
E2E_RATES = [int(rate) for rate in os.environ.get("BENCH_E2E_RATE", "5000").split(",")]
E2E_SECONDS = float(os.environ.get("BENCH_E2E_SECONDS", "40"))
E2E_WARMUP_SECONDS = float(os.environ.get("BENCH_E2E_WARMUP_SECONDS", "10"))
E2E_PARTITIONS = int(os.environ.get("BENCH_E2E_PARTITIONS", "8"))
E2E_ROUNDS = int(os.environ.get("BENCH_E2E_ROUNDS", str(ROUNDS)))
PHASES = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")
"""Spark's parts of a micro-batch. The sink's writer creation, its tasks and its commit are all in addBatch."""


@dataclass(frozen=True)
class System:
    label: str
    source: str
    sink: str
    options: dict[str, str] = field(default_factory=dict)
    """Options given to the kafka_eos source and sink: each undoes one improvement."""


EOS = "kafka_eos"
NO_FREEZE = "kafka_eos, gcFreeze=false"
UNPACKED = "kafka_eos, a task a partition"
JVM = "kafka"
EOS_INTO_SPARK = "kafka_eos into Spark's sink"
FLOOR = "Python floor"
SYSTEMS = {s.label: s for s in (
    System(EOS, "kafka_eos", "kafka_eos"),
    System(NO_FREEZE, "kafka_eos", "kafka_eos", {"gcFreeze": "false"}),
    System(UNPACKED, "kafka_eos", "kafka_eos", {"minRecordsPerPartition": "0"}),
    System(JVM, "kafka", "kafka"),
    System(EOS_INTO_SPARK, "kafka_eos", "kafka"),
    System(CEILING_SINK, "kafka_eos", CEILING_SINK),
    System(FLOOR, CEILING_STREAM_SOURCE, CEILING_SINK),
)}
LABELS = {EOS: "kafka_eos → kafka_eos (exactly-once)", NO_FREEZE: "  the same, gcFreeze=false",
          UNPACKED: "  the same, minRecordsPerPartition=0", JVM: "kafka → kafka (Spark's JVM, at-least-once)",
          EOS_INTO_SPARK: "kafka_eos → Spark's kafka sink", CEILING_SINK: "kafka_eos → ceiling (drops its input)",
          FLOOR: "Python floor: no Kafka, Python source → ceiling"}
SOURCE_ONLY = {"minRecordsPerPartition"}
"""Options of the source that the sink does not take; the others go to both."""


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def source_stream(spark: Any, system: System, bootstrap: str, topic: str, starting: str, max_per_trigger: int | None) -> Any:
    if system.source == CEILING_STREAM_SOURCE:
        return (spark.readStream.format(CEILING_STREAM_SOURCE).option("rowsPerBatch", ROWS_PER_BATCH)
                .option("batches", BATCHES).load().selectExpr("key", "value", "partition"))
    reader = (spark.readStream.format(system.source).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
              .option("startingOffsets", starting))
    if max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", max_per_trigger)
    if system.source == "kafka_eos":
        reader = reader.options(**system.options)
    return reader.load().selectExpr("key", "value", "partition")


def sink_options(system: System, bootstrap: str, topic: str, count_file: Path) -> dict[str, str]:
    if system.sink == CEILING_SINK:
        return {"countFile": str(count_file)}
    options = {"kafka.bootstrap.servers": bootstrap, "topic": topic}
    if system.sink == "kafka_eos":
        options.update({k: v for k, v in system.options.items() if k not in SOURCE_ONLY})
    return options


def micro_batches(spark: Any, admin: AdminClient, bootstrap: str, systems: dict[str, System]) -> None:
    records = ROWS_PER_BATCH * BATCHES
    requests_log = request_log()
    requests: dict[str, RequestTally] = {}
    batch_counts: dict[str, int] = {}

    def run(system: System, source: str, partitions: int) -> list[dict[str, float]]:
        sink = f"lat-out-{uuid.uuid4().hex[:8]}"
        if system.sink != CEILING_SINK:
            admin.create_topics([NewTopic(sink, partitions, 1)])[sink].result(30)
        checkpoint = tempfile.mkdtemp(prefix="bench-latency-")
        count_file = Path(checkpoint) / "ceiling-count"
        start_mark = requests_log.mark() if requests_log else 0
        query = (
            source_stream(spark, system, bootstrap, source, "earliest", ROWS_PER_BATCH).writeStream.format(system.sink)
            .options(**sink_options(system, bootstrap, sink, count_file)).option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start()
        )
        query.awaitTermination()
        batches = [p for p in query.recentProgress if p.numInputRows]
        if requests_log:
            time.sleep(1)  # the log is written after the response is sent
            requests.setdefault(system.label, RequestTally()).add(requests_log.tally(start_mark, requests_log.mark()))
            batch_counts[system.label] = batch_counts.get(system.label, 0) + len(query.recentProgress)
        written = int(count_file.read_text()) if system.sink == CEILING_SINK else count_committed(bootstrap, sink, partitions)
        check_count(system.label, written, records)
        return [{k: float(v) for k, v in p.durationMs.items()} for p in batches[1:]]

    print(f"{'partitions':>10}  {'system':<44} {'p50 ms':>8} {'p90 ms':>8}")
    for partitions in PARTITION_COUNTS:
        source = f"lat-src-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(source, partitions, 1)])[source].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i in range(records):
            produce_one(producer, source, b"v" * 100, str(i).encode(), i % partitions)
        producer.flush(60)
        durations: dict[str, list[dict[str, float]]] = {label: [] for label in systems}
        requests.clear()
        batch_counts.clear()
        for _ in range(ROUNDS):
            for label, system in systems.items():
                durations[label] += run(system, source, partitions)
        times = {label: [d["triggerExecution"] for d in batches] for label, batches in durations.items()}
        p50 = {label: statistics.median(t) for label, t in times.items()}
        for label in systems:
            print(f"{partitions:>10}  {LABELS[label]:<44} {p50[label]:>8.0f} {percentile(times[label], 0.9):>8.0f}", flush=True)
        if EOS in p50 and JVM in p50:
            print(f"{partitions:>10}  pipeline ratio kafka_eos / Spark's JVM: p50 {p50[EOS] / p50[JVM]:.2f} "
                  f"(+{p50[EOS] - p50[JVM]:.0f} ms), over {len(times[EOS])} batches each")
        if FLOOR in p50 and EOS in p50 and JVM in p50:
            print(f"{'':>10}  of kafka_eos's p50, Spark's machinery for a Python source and sink (the floor) is "
                  f"{p50[FLOOR]:.0f} ms ({p50[FLOOR] / p50[JVM]:.2f}x Spark's JVM pipeline); kafka_eos's own work "
                  f"{p50[EOS] - p50[FLOOR]:+.0f} ms")
        if EOS_INTO_SPARK in p50:
            sinks = {label: p50[label] - p50[EOS_INTO_SPARK] for label in (EOS, CEILING_SINK) if label in p50}
            print(f"{'':>10}  the sink alone, over Spark's sink with the same source: "
                  + ", ".join(f"{LABELS[label].strip()} {gap:+.0f} ms" for label, gap in sinks.items()))
        for label in (x for x in (NO_FREEZE, UNPACKED) if x in p50 and EOS in p50):
            print(f"{'':>10}  {LABELS[label].strip()} costs p50 {p50[label] - p50[EOS]:+.0f} ms")
        for label in (x for x in (EOS, JVM, FLOOR) if x in durations):
            print(f"{'':>10}  {label} phases (median ms of Spark's durationMs): " + ", ".join(
                f"{phase} {statistics.median(d.get(phase, 0.0) for d in durations[label]):.0f}" for phase in PHASES))
        for label, tally in requests.items():
            print(f"{'':>10}  {label}, broker requests a micro-batch (query start included): "
                  f"{tally.summary(batch_counts[label])}")


class _RateProducer(threading.Thread):
    """Produces ``rate`` records a second for ``seconds``, round robin over the partitions, each value the
    production time (float seconds, big-endian) padded to 100 bytes."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int, seconds: float) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        self.topic, self.partitions, self.rate, self.seconds = topic, partitions, rate, seconds
        self.produced = 0

    def run(self) -> None:
        start = time.time()
        tick = 0.01
        while (now := time.time()) < start + self.seconds:
            due = int((now - start) * self.rate)
            while self.produced < due:
                value = struct.pack(">d", time.time()).ljust(100, b"v")
                produce_one(self.producer, self.topic, value, None, self.produced % self.partitions)
                self.produced += 1
            self.producer.poll(0)
            time.sleep(tick)
        self.producer.flush(60)


def _received_latencies(bootstrap: str, topic: str, partitions: int, producer: _RateProducer, counted_after: float,
                        deadline_s: float) -> tuple[int, list[float]]:
    """Reads until every record ``producer`` made is received (or ``deadline_s`` passes)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{uuid.uuid4().hex}", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 5})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    received, latencies = 0, []
    end = time.time() + deadline_s
    while (producer.is_alive() or received < producer.produced) and time.time() < end:
        for message in consumer.consume(10_000, 0.1):
            if message.error():
                continue
            now = time.time()
            received += 1
            produced_at = struct.unpack(">d", (message.value() or b"")[:8])[0]
            if produced_at >= counted_after:
                latencies.append((now - produced_at) * 1000)
    consumer.close()
    return received, latencies


FIRST_BATCH_TIMEOUT_S = 180.0


def _wait_for_first_batch(query: Any) -> None:
    """Until the query's first (empty) micro-batch has ended: it starts the query's Python workers, which took from 3
    to 11 s here, and records produced meanwhile would be measured as the backlog of a starting query."""
    deadline = time.monotonic() + FIRST_BATCH_TIMEOUT_S
    while not any("addBatch" in p.durationMs for p in query.recentProgress):
        if time.monotonic() > deadline or query.exception() is not None:
            raise RuntimeError(f"the query's first micro-batch did not end within {FIRST_BATCH_TIMEOUT_S:g} s: {query.exception()}")
        time.sleep(0.2)
    time.sleep(1)


@dataclass(frozen=True)
class EndToEndRound:
    """One query's end-to-end figures: latencies of the records counted, and its micro-batches over them."""

    latencies: list[float]
    batch_ms: list[float]
    batch_rows: list[int]


def _end_to_end_round(spark: Any, admin: AdminClient, bootstrap: str, system: System, rate: int) -> EndToEndRound:
    source, sink = f"e2e-src-{uuid.uuid4().hex[:8]}", f"e2e-out-{uuid.uuid4().hex[:8]}"
    for topic in (source, sink):
        admin.create_topics([NewTopic(topic, E2E_PARTITIONS, 1)])[topic].result(30)
    checkpoint = tempfile.mkdtemp(prefix="bench-e2e-")
    query = (
        source_stream(spark, system, bootstrap, source, "earliest", None).writeStream.format(system.sink)
        .options(**sink_options(system, bootstrap, sink, Path(checkpoint))).option("checkpointLocation", checkpoint).start()
    )
    try:
        _wait_for_first_batch(query)
        producer = _RateProducer(bootstrap, source, E2E_PARTITIONS, rate, E2E_SECONDS)
        counted_after = time.time() + E2E_WARMUP_SECONDS
        producer.start()
        received, latencies = _received_latencies(bootstrap, sink, E2E_PARTITIONS, producer, counted_after, E2E_SECONDS + 120)
        producer.join()
        check_count(system.label, received, producer.produced)
        counted = [p for p in query.recentProgress if p.numInputRows and _epoch_s(p.timestamp) >= counted_after]
    finally:
        query.stop()
    return EndToEndRound(latencies, [float(p.durationMs["triggerExecution"]) for p in counted],
                         [int(p.numInputRows) for p in counted])


def _epoch_s(timestamp: str) -> float:
    """Seconds since the epoch of a progress report's ``timestamp`` (ISO 8601, UTC, ``Z``)."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def end_to_end(spark: Any, admin: AdminClient, bootstrap: str, systems: dict[str, System]) -> None:
    ratios = {rate: _end_to_end_at(spark, admin, bootstrap, systems, rate) for rate in E2E_RATES}
    measured = [(rate, ratio) for rate, ratio in ratios.items() if ratio is not None]
    if len(measured) < 2:
        return
    print("   end-to-end p99 ratio by rate: " + ", ".join(f"{rate:,}/s {ratio:.2f}" for rate, ratio in measured))
    crossings = [(low, high) for (low, below), (high, above) in zip(measured, measured[1:]) if (below <= 1.0) != (above <= 1.0)]
    if crossings:
        print("   the ratio crosses 1.0 between " + "; ".join(f"{low:,} and {high:,} records a second" for low, high in crossings))
    else:
        side = "at or under" if measured[0][1] <= 1.0 else "over"
        print(f"   the ratio does not cross 1.0 between {measured[0][0]:,} and {measured[-1][0]:,} records a second: {side} it throughout")


def _end_to_end_at(spark: Any, admin: AdminClient, bootstrap: str, systems: dict[str, System], rate: int) -> float | None:
    """One rate's alternating rounds; the ratio of the medians of the p99s, when both systems ran."""
    print(f">> end to end: {rate:,} records a second for {E2E_SECONDS:.0f} s into {E2E_PARTITIONS} partitions, default "
          f"trigger, {E2E_ROUNDS} alternating rounds; latency = read_committed receipt less production time, the first "
          f"{E2E_WARMUP_SECONDS:.0f} s left out; the micro-batches that started after it beside")
    print(f"   {'system':<44} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'batches':>8} {'batch p50':>10} "
          f"{'batch p90':>10} {'batch max':>10} {'rows p50':>9}")
    chosen = [label for label in (EOS, JVM) if label in systems]
    p99s: dict[str, list[float]] = {label: [] for label in chosen}
    for _ in range(E2E_ROUNDS):
        for label in chosen:
            result = _end_to_end_round(spark, admin, bootstrap, systems[label], rate)
            p99s[label].append(percentile(result.latencies, 0.99))
            batch_ms = result.batch_ms or [0.0]
            print(f"   {LABELS[label]:<44} {statistics.median(result.latencies):>8.0f} {p99s[label][-1]:>8.0f} "
                  f"{max(result.latencies):>8.0f} {len(result.batch_ms):>8} {statistics.median(batch_ms):>10.0f} "
                  f"{percentile(batch_ms, 0.9):>10.0f} {max(batch_ms):>10.0f} "
                  f"{statistics.median(result.batch_rows or [0]):>9.0f}", flush=True)
    if len(chosen) < 2:
        return None
    medians = {label: statistics.median(values) for label, values in p99s.items()}
    print(f"   end-to-end p99, median of the rounds: kafka_eos {medians[EOS]:.0f} ms, Spark's JVM {medians[JVM]:.0f} ms, "
          f"ratio {medians[EOS] / medians[JVM]:.2f}")
    return medians[EOS] / medians[JVM]


def chosen_systems(chosen: str) -> dict[str, System]:
    """The systems ``BENCH_SYSTEMS`` names by label (separated by ``;``, or by ``,`` when no label has one), or all."""
    if not chosen.strip():
        return SYSTEMS
    labels = [label.strip() for label in chosen.split(";" if ";" in chosen else ",")]
    unknown = [label for label in labels if label not in SYSTEMS]
    if unknown:
        sys.exit(f"BENCH_SYSTEMS names {unknown}, which this benchmark does not have. Fix: name systems by their labels, "
                 f"separated by ';': {'; '.join(SYSTEMS)}")
    return {label: SYSTEMS[label] for label in labels}


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    systems = chosen_systems(os.environ.get("BENCH_SYSTEMS", ""))
    with ExitStack() as stack:
        gc_log = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-worker-gc-"))) / "collections.tsv"
        probing_gc = worker_gc.enable(gc_log)
        bootstrap = bootstrap_servers(stack)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        jars = connector_jars()
        # The end-to-end part reads every micro-batch of its counted window from recentProgress (100 by default).
        spark = bench_spark("bench-latency", jars, spark__sql__shuffle__partitions="2",
                            spark__sql__streaming__numRecentProgressUpdates="1000")
        spark.dataSource.register(DiscardingSink)
        spark.dataSource.register(StreamCeilingSource)
        print(f">> pyspark {spark.version}, local[2]; {BATCHES} micro-batches of {ROWS_PER_BATCH} rows per run, "
              f"{ROUNDS} alternating rounds; Spark's connector {next(j.name for j in jars if j.name.startswith('spark-sql-kafka'))}")
        if PARTITION_COUNTS and BATCHES:
            micro_batches(spark, admin, bootstrap, systems)
        if E2E_SECONDS > 0 and E2E_ROUNDS > 0:
            end_to_end(spark, admin, bootstrap, systems)
        spark.stop()
        if probing_gc:
            worker_gc.report(gc_log)


if __name__ == "__main__":
    main()
