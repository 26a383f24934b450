"""Network faults between the connector's clients and the broker: exactly once through them.

Every client of the code under test (Spark's tasks, the driver's coordinator, the reader) reaches a broker of
its own through a seeded :class:`~tests.harness.fault_proxy.FaultProxy` (tests/harness/proxied_kafka.py: the
broker advertises the proxy). The proxy injects latency, black-holed requests, black-holed responses (the
broker acts on the request; the client never hears back), connection resets and short outages, on a schedule
bounded in count and time and seeded by ``KAFKA_EOS_FAULT_SEED``. A batch backfill (``df.write`` with a
``writeId``, re-run with the same one after a failure) and a streaming pipeline (``kafka_eos`` source to
``kafka_eos`` sink, restarted after a failure) run through it; then the judges, on the broker's direct listener
(never through the proxy), count the sink: nothing duplicated, nothing missing, no transaction of the prefix
left open, the last stable offset at the high watermark. A failed run (an exception) is allowed when its re-run
ends exactly once; a record lost or doubled fails the test, loud (the sink's KafkaEosCommittedDataLostError) or
silent. Each fault kind of the schedule must have fired.

Every test here is in the long tier (``make test-all``): a broker of its own and minutes of faults do not fit
``make test``'s budget. The short variants are a quick check of one seed; the others put more faults in a longer window.
On failure, the message names the seed, the schedule and what each fault did.
"""

from __future__ import annotations

import gc
import os
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.harness.fault_schedule import (
    BLACKHOLE_REQUEST,
    BLACKHOLE_RESPONSE,
    COMMIT_CRITICAL,
    LATENCY,
    OTHER_TARGETS,
    OUTAGE,
    RESET,
    Fault,
    FaultSchedule,
)
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import assert_stable, open_transactions_by_kafka
from tests.harness.proxied_kafka import ProxiedKafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SEED_ENV = "KAFKA_EOS_FAULT_SEED"
SEED = int(os.environ.get(SEED_ENV, "20261126"))
# Short enough that a participant left open by a failed run times out within a test; the least the sink allows
# is 20 s (a decision must commit 10 s before its earliest participant times out).
TRANSACTION_TIMEOUT_MS = 30_000
SHORT = {LATENCY: 1, BLACKHOLE_REQUEST: 2, BLACKHOLE_RESPONSE: 3, RESET: 1, OUTAGE: 1}
LONG = {LATENCY: 3, BLACKHOLE_REQUEST: 5, BLACKHOLE_RESPONSE: 10, RESET: 4, OUTAGE: 3}
# The long tier's first outage: long enough that an epoch in flight runs out of its transaction timeout's time
# (the decision needs 10 s left), so that runs fail and are re-run or restarted.
LONG_OUTAGE_S = 16
# A batch write from generated rows reads nothing and commits no group offsets: no black hole waits for those.
BATCH_CRITICAL = tuple(apis for apis in COMMIT_CRITICAL if "TxnOffsetCommit" not in apis)
BATCH_OTHERS = tuple(apis for apis in OTHER_TARGETS if apis is None or "ListOffsets" not in apis)


@pytest.fixture(scope="module")
def proxied(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedKafka]:
    """A broker of this module's own, behind the fault proxy (not the session's: it must advertise the proxy).
    One write through it first, without faults: a schedule's window is then not spent starting Spark's workers."""
    broker = ProxiedKafka(tmp_path_factory.mktemp("proxied-kafka")).start()
    try:
        topic = broker.judge().create_topic(1, prefix="warm-up")
        (spark.range(0, 3, numPartitions=1).selectExpr("CAST(id AS STRING) AS value").write.format("kafka_eos").mode("append")
         .option("kafka.bootstrap.servers", broker.proxied_bootstrap).option("topic", topic)
         .option("transactional.id.prefix", f"warm-up-{uuid.uuid4().hex[:8]}").save())
        yield broker
    finally:
        broker.kill()


@dataclass
class Run:
    """What a test did, for its messages: the schedule, each failure of a run, and what the proxy did."""

    broker: ProxiedKafka
    schedule: FaultSchedule
    failures: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def failed(self, what: str, err: BaseException) -> None:
        self.failures.append(f"t+{time.monotonic() - self.started:5.1f}s {what}: {summary(err)}")

    def explain(self) -> str:
        failures = "\n".join(f"  {f}" for f in self.failures) or "  none"
        return (f"{SEED_ENV}={self.schedule.seed}; schedule: {self.schedule.describe()}\n"
                f"proxy: {self.broker.proxy.report()}\nfailed runs ({len(self.failures)}):\n{failures}")


def summary(err: BaseException) -> str:
    """The error's type and the package's own error in it (a Spark error wraps it in a Python traceback)."""
    text = str(err)
    own = re.findall(r"^(?:spark_kafka_eos\.errors\.)?(KafkaEos\w+: .*)$", text, re.MULTILINE) or re.findall(
        r"^((?:cimpl\.|kafka\.errors\.)?\w*(?:Exception|Error): .*)$", text, re.MULTILINE)
    loud = "IS COMMITTED" in text or "nothing was committed" in text.lower() or "Nothing of it is visible" in text
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return f"{type(err).__name__}{' (loud)' if loud else ''}: {(own[-1] if own else lines[0] if lines else '')[:600]}"


def judge_exactly_once(run: Run, judge: KafkaTestCluster, sink: str, prefix: str, decision_log: str, expected: list[Sent],
                       ordered: bool) -> None:
    """The judges, on the direct listener: each expected value exactly once (in per-partition order when ``ordered``),
    nothing else, no transaction of ``prefix`` open, LSO == high watermark on the sink and the decision log."""
    still_open = open_transactions_by_kafka(judge.bootstrap_servers, prefix + "-")
    judge.wait_until_stable(sink, timeout_s=TRANSACTION_TIMEOUT_MS / 1000 + 15)
    out = judge.read_committed(sink)
    counts = Counter(r.value for r in out)
    duplicates = {v: n for v, n in counts.items() if n > 1}
    missing = sorted({s.value for s in expected} - set(counts))
    unexpected = sorted(set(counts) - {s.value for s in expected})
    problems = []
    if duplicates:
        problems.append(f"{len(duplicates)} DUPLICATED records, e.g. {sorted(duplicates.items())[:8]}")
    if missing:
        problems.append(f"{len(missing)} LOST records, e.g. {missing[:8]}")
    if unexpected:
        problems.append(f"{len(unexpected)} records nobody wrote, e.g. {unexpected[:8]}")
    if still_open:
        problems.append(f"transactions of the prefix left open: {still_open}")
    for partition in sorted({s.partition for s in expected}) if ordered and not problems else ():
        written = [s.value for s in expected if s.partition == partition]
        read = [r.value for r in out if r.partition == partition]
        if read != written:
            problems.append(f"partition {partition} out of order")
    assert not problems, "exactly-once VIOLATED: " + "; ".join(problems) + f"\n{run.explain()}"
    assert_stable(judge, sink, decision_log)


def assert_every_kind_fired(run: Run) -> None:
    unfired = run.broker.proxy.unfired(sorted({f.kind for f in run.schedule.faults}))
    assert not unfired, f"fault kinds that never fired: {unfired} (the test proves nothing about them)\n{run.explain()}"


def wait_for_schedule(run: Run, slack_s: float = 30.0) -> None:
    deadline = time.monotonic() + run.schedule.window_s + slack_s
    while not run.broker.proxy.done():
        assert time.monotonic() < deadline, f"the fault schedule did not end\n{run.explain()}"
        time.sleep(0.5)


def write_through_proxy(df: DataFrame, proxied: ProxiedKafka, sink: str, prefix: str, decision_log: str, write_id: str) -> None:
    """``df.write`` to ``sink`` through the proxy, as ``write_id``, with the tests' short transaction timeout."""
    (df.write.format("kafka_eos").mode("append")
     .option("kafka.bootstrap.servers", proxied.proxied_bootstrap)
     .option("topic", sink)
     .option("transactional.id.prefix", prefix)
     .option("decisionLogTopic", decision_log)
     .option("writeId", write_id)
     .option("kafka.transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
     .save())


# -- (a) a batch backfill, re-run with its writeId until it succeeds ------------------------------------------------

def backfill_through_faults(spark: SparkSession, proxied: ProxiedKafka, schedule: FaultSchedule, rows_per_day: int,
                            tries: int, max_days: int) -> None:
    judge = proxied.judge()
    tag = uuid.uuid4().hex[:8]
    sink, prefix, decision_log = judge.create_topic(3, prefix="faults-sink"), f"faults-batch-{tag}", f"_decisions-faults-{tag}"
    run = Run(proxied, schedule)
    expected: list[Sent] = []
    proxied.proxy.run(schedule)
    day = 0
    # New days are written while faults are due (at least 2 days); each day is re-run with its writeId until it succeeds.
    while day < 2 or (not proxied.proxy.done() and day < max_days):
        write_id = f"day-{day}"
        df = spark.range(0, rows_per_day, numPartitions=3).selectExpr(
            "CAST(id AS STRING) AS key", f"CONCAT('d{day}-', CAST(id AS STRING)) AS value", "CAST(id % 3 AS INT) AS partition")
        given_up, lost_reports = "", 0
        for attempt in range(1, tries + 1):
            if lost_reports >= 2:  # the sink says records of a committed decision are lost: re-runs with this writeId cannot help
                given_up = write_id
                break
            try:
                write_through_proxy(df, proxied, sink, prefix, decision_log, write_id)
                break
            except Exception as err:  # noqa: BLE001 - a failed run is allowed: it is re-run with the same writeId
                run.failed(f"{write_id} try {attempt}", err)
                lost_reports += "KafkaEosCommittedDataLostError" in str(err)
        else:
            given_up = write_id
        expected += [Sent(i % 3, str(i).encode(), f"d{day}-{i}".encode()) for i in range(rows_per_day)]
        day += 1
        if given_up:
            break
    wait_for_schedule(run)
    print(f"\nbatch backfill: {day} days in {time.monotonic() - run.started:.0f}s\n{run.explain()}")
    # The judges count the sink even when a day never succeeded: what is missing or doubled is the finding.
    judge_exactly_once(run, judge, sink, prefix, decision_log, expected, ordered=False)
    assert not given_up, f"{given_up} never succeeded\n{run.explain()}"
    assert_every_kind_fired(run)


@pytest.mark.long
def test_a_backfill_rerun_with_its_write_id_through_network_faults_is_exactly_once(spark: SparkSession, proxied: ProxiedKafka) -> None:
    schedule = FaultSchedule.seeded(SEED, 30, SHORT, max_stall_s=4, max_outage_s=3, critical=BATCH_CRITICAL, others=BATCH_OTHERS)
    backfill_through_faults(spark, proxied, schedule, rows_per_day=300, tries=8, max_days=30)


@pytest.mark.long
def test_backfills_through_many_network_faults_are_exactly_once(spark: SparkSession, proxied: ProxiedKafka) -> None:
    schedule = FaultSchedule.seeded(SEED + 1, 120, LONG, long_outage_s=LONG_OUTAGE_S, critical=BATCH_CRITICAL, others=BATCH_OTHERS)
    backfill_through_faults(spark, proxied, schedule, rows_per_day=600, tries=10, max_days=120)


# -- (b) a streaming pipeline, restarted after a failure ------------------------------------------------------------

@dataclass
class StreamingPipeline:
    spark: SparkSession
    proxied: ProxiedKafka
    source: str
    sink: str
    prefix: str
    decision_log: str
    group: str
    checkpoint: Path

    def start(self) -> StreamingQuery:
        df = (self.spark.readStream.format("kafka_eos")
              .option("kafka.bootstrap.servers", self.proxied.proxied_bootstrap)
              .option("subscribe", self.source)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", 60)
              .load()
              .selectExpr("key", "value", "partition", "topic AS source_topic", "partition AS source_partition",
                          "offset AS source_offset"))
        return (df.writeStream.format("kafka_eos")
                .option("kafka.bootstrap.servers", self.proxied.proxied_bootstrap)
                .option("topic", self.sink)
                .option("transactional.id.prefix", self.prefix)
                .option("decisionLogTopic", self.decision_log)
                .option("consumerGroup", self.group)
                .option("checkpointLocation", str(self.checkpoint))
                .option("kafka.transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
                .start())


def caught_up(query: StreamingQuery, timeout_s: float) -> bool:
    """``processAllAvailable`` bounded in time: False (the query stopped) if it is not done in ``timeout_s``;
    raises the query's failure."""
    outcome: list[BaseException | None] = []

    def wait() -> None:
        try:
            query.processAllAvailable()
            outcome.append(None)
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            outcome.append(err)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    waiter.join(timeout_s)
    if not outcome:
        query.stop()
        waiter.join(60)
        return False
    if outcome[0] is not None:
        raise outcome[0]
    return True


def stream_through_faults(spark: SparkSession, proxied: ProxiedKafka, tmp_path: Path, schedule: FaultSchedule, per_round: int,
                          max_restarts: int) -> None:
    judge = proxied.judge()
    tag = uuid.uuid4().hex[:8]
    pipeline = StreamingPipeline(spark, proxied, judge.create_topic(3, prefix="faults-src"), judge.create_topic(3, prefix="faults-sink"),
                                 f"faults-stream-{tag}", f"_decisions-faults-{tag}", f"faults-group-{tag}", tmp_path / "checkpoint")
    run = Run(proxied, schedule)
    produced: list[Sent] = []

    def produce() -> None:
        start = len(produced)
        produced.extend(judge.produce_plain(pipeline.source, [Sent(i % 3, f"k{i}".encode(), f"v{i}".encode())
                                                              for i in range(start, start + per_round)]))

    restarts = 0

    def restart(why: str, err: BaseException | None, stop: Callable[[], None]) -> StreamingQuery:
        nonlocal restarts
        if err is not None:
            run.failed(why, err)
        else:
            run.failures.append(f"t+{time.monotonic() - run.started:5.1f}s {why}")
        stop()
        restarts += 1
        assert restarts <= max_restarts, f"more than {max_restarts} restarts\n{run.explain()}"
        return pipeline.start()

    produce()
    proxied.proxy.run(schedule)
    query = pipeline.start()
    try:
        # While faults are due: a round of input every 2 s, and a restart whenever the query fails.
        next_round = time.monotonic() + 2
        while not proxied.proxy.done():
            assert time.monotonic() < run.started + schedule.window_s + 60, f"the fault schedule did not end\n{run.explain()}"
            if time.monotonic() >= next_round:
                produce()
                next_round += 2
            if not query.isActive:
                query = restart("query failed", query.exception(), query.stop)
            time.sleep(0.5)
        # Then until every record is through (a restart per failure or stall).
        while True:
            try:
                if caught_up(query, timeout_s=120):
                    break
                query = restart("query stalled: stopped after 120 s", None, lambda: None)
            except Exception as err:  # noqa: BLE001 - a failed query is allowed: it is restarted on its checkpoint
                query = restart("query failed", err, query.stop)
    finally:
        query.stop()
        # Drop the failed queries' Java objects now: their finalizers talk to the JVM (py4j), and run at a GC
        # inside a later ast.parse they made CPython 3.11 fail the session ("AST constructor recursion depth mismatch").
        gc.collect()
    print(f"\nstream: {len(produced)} records, {restarts} restarts in {time.monotonic() - run.started:.0f}s\n{run.explain()}")
    judge_exactly_once(run, judge, pipeline.sink, pipeline.prefix, pipeline.decision_log, produced, ordered=True)
    assert_every_kind_fired(run)


@pytest.mark.long
def test_a_pipeline_restarted_through_network_faults_is_exactly_once(spark: SparkSession, proxied: ProxiedKafka, tmp_path: Path) -> None:
    schedule = FaultSchedule.seeded(SEED, 30, SHORT, max_stall_s=4, max_outage_s=3)
    stream_through_faults(spark, proxied, tmp_path, schedule, per_round=40, max_restarts=10)


@pytest.mark.long
def test_a_pipeline_through_many_network_faults_is_exactly_once(spark: SparkSession, proxied: ProxiedKafka, tmp_path: Path) -> None:
    schedule = FaultSchedule.seeded(SEED + 1, 120, LONG, long_outage_s=LONG_OUTAGE_S)
    stream_through_faults(spark, proxied, tmp_path, schedule, per_round=60, max_restarts=30)


@pytest.mark.long
def test_a_pipeline_whose_offset_lookups_lose_their_answers_is_exactly_once(spark: SparkSession, proxied: ProxiedKafka, tmp_path: Path) -> None:
    """ListOffsets answered by the broker but never heard by the client, every 5 s: librdkafka's
    ``AdminClient.list_offsets`` then often returns offset -1001 (OFFSET_INVALID) with no error (or fails with
    "No leaders found"), which neither the source's planner nor the decision log may take for an offset. Today
    the decision log's lookup takes it and the query fails loudly (a KafkaEosDataLossError about offsets
    "-1001 to -1"); a restart goes on, exactly once."""
    faults = tuple(Fault(8.0 + 5 * i, BLACKHOLE_RESPONSE, 0.5, apis=("ListOffsets",)) for i in range(6))
    stream_through_faults(spark, proxied, tmp_path, FaultSchedule(SEED, 45, faults), per_round=40, max_restarts=10)


# -- (c) one answer lost: the commit point's, a task's --------------------------------------------------------------

THREE_HUNDRED = [Sent(i % 3, str(i).encode(), f"v{i}".encode()) for i in range(300)]


def write_three_hundred(spark: SparkSession, proxied: ProxiedKafka, sink: str, prefix: str, decision_log: str, write_id: str) -> None:
    """One batch write of :data:`THREE_HUNDRED` through the proxy, in three tasks, one run."""
    df = spark.range(0, 300, numPartitions=3).selectExpr(
        "CAST(id AS STRING) AS key", "CONCAT('v', CAST(id AS STRING)) AS value", "CAST(id % 3 AS INT) AS partition")
    write_through_proxy(df, proxied, sink, prefix, decision_log, write_id)

@pytest.mark.long
def test_a_decision_whose_commit_answer_is_lost_is_finished_in_time(spark: SparkSession, proxied: ProxiedKafka) -> None:
    """The broker commits the decision, but its answer to the driver's EndTxn never arrives (the connection is
    stalled for most of the participants' timeout, then reset). The decision is committed: the driver must learn
    that in time to commit every participant before it times out, not wait out the stall and find the
    participants aborted (a loud loss), nor abort them. The driver's next InitProducerId of the coordinator's id
    (a fence to settle the outcome, or the next record's producer) is stalled too: settling by fencing and
    reading the log back is then too slow."""
    judge = proxied.judge()
    tag = uuid.uuid4().hex[:8]
    sink, prefix, decision_log = judge.create_topic(3, prefix="faults-sink"), f"faults-lost-answer-{tag}", f"_decisions-faults-{tag}"
    slow_fence = Fault(0.0, BLACKHOLE_REQUEST, duration_s=TRANSACTION_TIMEOUT_MS / 1000, apis=("InitProducerId/coordinator",))
    stall = Fault(0.0, BLACKHOLE_RESPONSE, duration_s=TRANSACTION_TIMEOUT_MS / 1000 + 5, apis=("EndTxn/coordinator",),
                  then=(slow_fence,))
    run = Run(proxied, FaultSchedule(SEED, 2 * TRANSACTION_TIMEOUT_MS / 1000 + 40, (stall,)))
    proxied.proxy.run(run.schedule)
    write_three_hundred(spark, proxied, sink, prefix, decision_log, write_id="lost-answer")
    print(f"\nwrite done at t+{proxied.proxy.elapsed_s():.1f}s\n{run.explain()}")
    fired = [f for f in proxied.proxy.log if f.fault == stall]
    assert fired and fired[0].answered and "EndTxn" in fired[0].detail and f"{prefix}-coordinator" in fired[0].detail, run.explain()
    wait_for_schedule(run)
    judge_exactly_once(run, judge, sink, prefix, decision_log, THREE_HUNDRED, ordered=False)


@pytest.mark.long
@pytest.mark.parametrize("stall_s", [2.0, 4.0])
def test_a_task_whose_add_partitions_answer_is_lost_writes_exactly_once_without_a_rerun(spark: SparkSession, proxied: ProxiedKafka,
                                                                                       stall_s: float) -> None:
    """The broker adds a task's partition to its transaction, but its answer never reaches the task (the connection
    is stalled, then reset). The task's client retries on a new connection and the one run succeeds, exactly once: a
    task that waited out its transaction's timeout would fail the run (the decision needs 10 s of it left)."""
    judge = proxied.judge()
    tag = uuid.uuid4().hex[:8]
    sink, prefix, decision_log = judge.create_topic(3, prefix="faults-sink"), f"faults-lost-add-{tag}", f"_decisions-faults-{tag}"
    lost = Fault(0.0, BLACKHOLE_RESPONSE, duration_s=stall_s, apis=(f"AddPartitionsToTxn/{prefix}-",))
    run = Run(proxied, FaultSchedule(SEED, 20, (lost,)))
    proxied.proxy.run(run.schedule)
    write_three_hundred(spark, proxied, sink, prefix, decision_log, write_id="lost-add")
    print(f"\nwrite done at t+{proxied.proxy.elapsed_s():.1f}s\n{run.explain()}")
    fired = [f for f in proxied.proxy.log if f.fault == lost]
    assert fired and fired[0].answered and "coordinator" not in fired[0].detail, run.explain()
    judge_exactly_once(run, judge, sink, prefix, decision_log, THREE_HUNDRED, ordered=False)
