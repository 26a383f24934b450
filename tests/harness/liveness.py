"""Liveness of a streaming pipeline through a fault: how long after the fault's end records are visible again.

A :class:`RateFeeder` produces numbered records at a steady rate to a source topic, remembering when it sent
each; a :class:`VisibilityWatch`, an independent read_committed consumer of the sink, remembers when each became
visible. Both connect to the broker directly (the judge's listener), never through the fault proxy. After a fault
that ended at ``returned_at`` (``time.monotonic()``), :func:`back_after_s` is the time from then until the first
record *sent after it* became visible: what a user waiting for new data sees.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.harness.fault_schedule import Fault, FaultSchedule
from tests.harness.local_kafka import LocalKafka
from tests.harness.proxied_kafka import ProxiedKafka

OBSERVER_RECONNECT = {"reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 100}
"""The feeder and the watch reconnect within 0.1 s of a broker's return: with librdkafka's backoff (up to 10 s) they
would add their own delay to what is measured after a crash."""


class RateFeeder(threading.Thread):
    """Produces ``rate`` records a second (values ``"<n>"``, round robin over ``partitions``) until :meth:`stop`
    or ``max_s``; :attr:`sent_at` maps each value to when it was handed to the producer."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int, max_s: float = 600.0) -> None:
        super().__init__(daemon=True, name=f"feeder-{topic}")
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, **OBSERVER_RECONNECT})
        self._topic, self._partitions, self._rate, self._max_s = topic, partitions, rate, max_s
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self.sent_at: dict[bytes, float] = {}

    def sent(self) -> dict[bytes, float]:
        """When each record was sent, so far."""
        with self._lock:
            return dict(self.sent_at)

    def run(self) -> None:
        started = time.monotonic()
        n = 0
        while not self._stopped.is_set() and time.monotonic() - started < self._max_s:
            due = started + n / self._rate
            pause = due - time.monotonic()
            if pause > 0:
                self._stopped.wait(pause)
                continue
            value = str(n).encode()
            self._producer.produce(self._topic, value, key=value, partition=n % self._partitions)
            with self._lock:
                self.sent_at[value] = time.monotonic()
            self._producer.poll(0)
            n += 1
        self._producer.flush(30)

    def stop(self) -> int:
        """Stop producing; the number of records sent (all delivered: the producer is idempotent and flushed)."""
        self._stopped.set()
        self.join(60)
        return len(self.sent_at)


class VisibilityWatch(threading.Thread):
    """A read_committed consumer of ``topic`` from its start: :attr:`seen_at` maps each value to when it was first
    read, :attr:`counts` how often it was read."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True, name=f"watch-{topic}")
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"watch-{uuid.uuid4().hex}",
                                   "isolation.level": "read_committed", "enable.auto.commit": False,
                                   "fetch.wait.max.ms": 50, **OBSERVER_RECONNECT})
        self._consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
        self._stopped = threading.Event()
        self.seen_at: dict[bytes, float] = {}
        self.counts: Counter[bytes] = Counter()
        self._lock = threading.Lock()

    def run(self) -> None:
        try:
            while not self._stopped.is_set():
                for message in self._consumer.consume(1000, 0.1):
                    if message.error() is not None:
                        continue
                    now = time.monotonic()
                    value = message.value() or b""
                    with self._lock:
                        self.seen_at.setdefault(value, now)
                        self.counts[value] += 1
        finally:
            self._consumer.close()

    def visible(self) -> int:
        with self._lock:
            return len(self.seen_at)

    def wait_for(self, count: int, timeout_s: float) -> bool:
        """Whether ``count`` distinct records became visible within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.visible() >= count:
                return True
            time.sleep(0.2)
        return self.visible() >= count

    def stop(self) -> None:
        self._stopped.set()
        self.join(30)


def back_after_s(feeder: RateFeeder, watch: VisibilityWatch, returned_at: float) -> float | None:
    """Seconds from ``returned_at`` until the first record sent after it was visible; None if none is (yet)."""
    sent_after = [v for v, at in feeder.sent().items() if at >= returned_at]
    with watch._lock:
        seen = [watch.seen_at[v] for v in sent_after if v in watch.seen_at]
    return min(seen) - returned_at if seen else None


def last_visible_before(feeder: RateFeeder, watch: VisibilityWatch) -> float | None:
    """When the newest record visible so far was sent (``time.monotonic()``): where a stalled stream stopped."""
    with watch._lock:
        values = list(watch.seen_at)
    sent_at = feeder.sent()
    sent = [sent_at[v] for v in values if v in sent_at]
    return max(sent) if sent else None


def exactly_once_problems(feeder: RateFeeder, watch: VisibilityWatch) -> list[str]:
    """What the watch saw other than each sent record exactly once."""
    with watch._lock:
        counts = dict(watch.counts)
    sent = set(feeder.sent())
    problems = []
    duplicated = {v: n for v, n in counts.items() if n > 1}
    missing = sorted(sent - set(counts), key=int)
    unexpected = sorted(set(counts) - sent)
    if duplicated:
        problems.append(f"{len(duplicated)} DUPLICATED, e.g. {sorted(duplicated.items())[:5]}")
    if missing:
        problems.append(f"{len(missing)} LOST of {len(sent)}, e.g. {missing[:5]}")
    if unexpected:
        problems.append(f"{len(unexpected)} records nobody sent, e.g. {unexpected[:5]}")
    return problems


# -- a pipeline through a fault, measured ---------------------------------------------------------------------------

EXACTLY_ONCE = "kafka_eos"
SPARKS = "kafka"
CRASH = "crash"
"""A fault that is not the proxy's: the broker killed (-9) and restarted on its data."""
PART_CLIENTS = {
    # A fault of one part of a pipeline reaches the connections of these client ids. kafka_eos's task producers are
    # named by their transactional ids (<prefix>-<run>-<partition>-<attempt>-<slot>), its coordinator's producer
    # <prefix>-coordinator, its transaction session spark-kafka-eos-txn; Spark's clients are producer-<n>,
    # consumer-<group>-<n> and adminclient-<n>.
    (EXACTLY_ONCE, "sink"): r"^liveness-.*-\d+$",
    (EXACTLY_ONCE, "reader"): r"^spark-kafka-eos-reader",
    (EXACTLY_ONCE, "decisions"): r"-coordinator$|^spark-kafka-eos-txn$",
    (SPARKS, "sink"): r"^producer-",
    (SPARKS, "reader"): r"^consumer-|^adminclient-",
}


@dataclass
class FaultRun:
    """What a pipeline did through one fault."""

    system: str
    fault: str
    back_s: float | None
    """Seconds from the fault's end to the first record sent after it, visible (None: stalled)."""
    sent: int = 0
    visible: int = 0
    problems: list[str] = field(default_factory=list)
    stop_s: float | None = None
    """How long ``query.stop()`` took (None: it did not return in time)."""
    failure: str | None = None
    """The query's error, if it failed."""
    reached: int | None = None
    """A proxy's fault: how many connections it reset or refused (0: it missed the pipeline)."""


def start_pipeline(spark: SparkSession, system: str, bootstrap: str, source: str, sink: str, checkpoint: Path,
                   engine: str = "auto") -> StreamingQuery:
    """``system`` (``kafka_eos`` on ``engine`` at both ends, or Spark's ``kafka``), source to sink, the default trigger."""
    tag = uuid.uuid4().hex[:8]
    reader = spark.readStream.format(system).option("kafka.bootstrap.servers", bootstrap).option("subscribe", source) \
        .option("startingOffsets", "earliest")
    if system == EXACTLY_ONCE:
        reader = reader.option("readEngine", engine)
    df = reader.load().selectExpr("key", "value", "partition")
    writer = df.writeStream.format(system).option("kafka.bootstrap.servers", bootstrap).option("topic", sink) \
        .option("checkpointLocation", str(checkpoint))
    if system == EXACTLY_ONCE:
        writer = writer.option("transactional.id.prefix", f"liveness-{tag}").option("decisionLogTopic", f"_decisions-liveness-{tag}") \
            .option("writeEngine", engine)
    return writer.start()


def stop_within(query: StreamingQuery, timeout_s: float) -> float | None:
    """``query.stop()``; its seconds, or None if it did not return within ``timeout_s`` (it is left running)."""
    started = time.monotonic()
    stopper = threading.Thread(target=query.stop, daemon=True)
    stopper.start()
    stopper.join(timeout_s)
    return None if stopper.is_alive() else time.monotonic() - started


def through_fault(spark: SparkSession, broker: ProxiedKafka, system: str, fault: Fault | str, workdir: Path,
                  partitions: int = 4, rate: int = 500, stall_s: float = 20.0, crash_down_s: float = 1.0,
                  engine: str = "auto") -> FaultRun:
    """Run ``system``'s pipeline (kafka_eos on ``engine``) through ``broker``'s proxy with a feeder and a watch on the direct listener; once it
    delivers, inject ``fault`` (a proxy fault, armed at once, or :data:`CRASH`), and measure until the first record
    sent after the fault's end is visible (at most ``stall_s``); then stop the feeder, wait for every record, stop."""
    judge = broker.judge()
    source, sink = judge.create_topic(partitions, prefix="live-src"), judge.create_topic(partitions, prefix="live-sink")
    feeder = RateFeeder(broker.judge_bootstrap, source, partitions, rate)
    watch = VisibilityWatch(broker.judge_bootstrap, sink, partitions)
    watch.start()
    feeder.start()
    query = start_pipeline(spark, system, broker.proxied_bootstrap, source, sink, workdir / f"checkpoint-{uuid.uuid4().hex[:8]}",
                           engine)
    name = fault if isinstance(fault, str) else fault.describe()
    run = FaultRun(system, name, None)
    try:
        if not watch.wait_for(rate, 120):
            run.failure = "delivered nothing before the fault"
            return run
        time.sleep(3)
        if isinstance(fault, str):
            LocalKafka.kill(broker)
            time.sleep(crash_down_s)
            LocalKafka.start(broker)
        else:
            broker.proxy.run(FaultSchedule(0, fault.duration_s + 30, (fault,)))
            while not broker.proxy.counts() and broker.proxy.elapsed_s() < 30:
                time.sleep(0.01)
            time.sleep(fault.duration_s)
            run.reached = broker.proxy.reached
        returned = time.monotonic()
        while back_after_s(feeder, watch, returned) is None and time.monotonic() < returned + stall_s and query.isActive:
            time.sleep(0.05)
        run.back_s = back_after_s(feeder, watch, returned)
        if not query.isActive:
            run.failure = str(query.exception())
    finally:
        run.sent = feeder.stop()
        watch.wait_for(run.sent, 90 if run.back_s is not None else 5)
        run.stop_s = stop_within(query, 60)
        watch.stop()
    run.visible = watch.visible()
    run.problems = exactly_once_problems(feeder, watch)
    return run
