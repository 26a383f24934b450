"""Liveness through a network blip and a broker crash: the stream delivers again soon after, without a restart.

An exactly-once pipeline (``kafka_eos`` source to ``kafka_eos`` sink, 4 partitions, the default trigger) runs with
every connection of its driver and tasks through the fault proxy, while a feeder produces 500 records a second
to its source and an independent read_committed consumer watches its sink, both on the broker's direct listener.
Then the proxy is down for a while (every connection reset, new ones refused), or the broker is killed (-9) and
restarted on its data. The test measures the time from the network's (or broker's) return to the first visible
record sent after it, and fails on a stall: the stream must deliver again without anyone restarting it, and
``query.stop()`` must return. At the end every record is visible exactly once.

The bound here is a stall's, not a speed goal (``make bench-faults`` prints the time beside Spark's own pipeline).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.harness.fault_proxy import OUTAGE, Fault, FaultSchedule
from tests.harness.liveness import RateFeeder, VisibilityWatch, back_after_s, exactly_once_problems, last_visible_before
from tests.harness.local_kafka import LocalKafka
from tests.harness.proxied_kafka import ProxiedKafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.long]

PARTITIONS = 4
RATE = 500
STALL_S = 20.0
"""A stream not delivering this long after the fault's end is stalled (Spark's own pipeline: about 1.2 s)."""
STOP_S = 60.0


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedKafka]:
    broker = ProxiedKafka(tmp_path_factory.mktemp("liveness-kafka")).start()
    try:
        yield broker
    finally:
        broker.kill()


def start_pipeline(spark: SparkSession, bootstrap: str, source: str, sink: str, tmp_path: Path) -> StreamingQuery:
    tag = uuid.uuid4().hex[:8]
    df = (spark.readStream.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest").load()
          .selectExpr("key", "value", "partition"))
    return (df.writeStream.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
            .option("transactional.id.prefix", f"liveness-{tag}").option("decisionLogTopic", f"_decisions-liveness-{tag}")
            .option("checkpointLocation", str(tmp_path / "checkpoint")).start())


def stop_in_time(query: StreamingQuery) -> float:
    """``query.stop()``, failing the test if it does not return within :data:`STOP_S`; its seconds."""
    started = time.monotonic()
    stopper = threading.Thread(target=query.stop, daemon=True)
    stopper.start()
    stopper.join(STOP_S)
    assert not stopper.is_alive(), f"query.stop() did not return within {STOP_S:g}s: the micro-batch's commit hangs"
    return time.monotonic() - started


def through_fault(spark: SparkSession, proxied: ProxiedKafka, tmp_path: Path, fault: str, seconds: float) -> None:
    judge = proxied.judge()
    source, sink = judge.create_topic(PARTITIONS, prefix="live-src"), judge.create_topic(PARTITIONS, prefix="live-sink")
    feeder = RateFeeder(proxied.judge_bootstrap, source, PARTITIONS, RATE)
    watch = VisibilityWatch(proxied.judge_bootstrap, sink, PARTITIONS)
    watch.start()
    feeder.start()
    query = start_pipeline(spark, proxied.proxied_bootstrap, source, sink, tmp_path)
    try:
        assert watch.wait_for(RATE, 120), "the pipeline delivered nothing before the fault"
        time.sleep(3)
        if fault == OUTAGE:
            proxied.proxy.run(FaultSchedule(0, seconds + 1, (Fault(0.0, OUTAGE, seconds),)))
            time.sleep(seconds)
            assert proxied.proxy.counts().get(OUTAGE) == 1, proxied.proxy.report()
        else:
            LocalKafka.kill(proxied)
            time.sleep(seconds)
            LocalKafka.start(proxied)
        returned = time.monotonic()
        deadline = returned + STALL_S
        while back_after_s(feeder, watch, returned) is None and time.monotonic() < deadline and query.isActive:
            time.sleep(0.1)
        back = back_after_s(feeder, watch, returned)
        assert query.isActive, f"the query failed after the {fault}: {query.exception()}"
        last = last_visible_before(feeder, watch)
        assert back is not None, (
            f"STALLED: nothing sent after the {fault}'s end is visible {STALL_S:g}s later; the newest visible record "
            f"was sent {(last or 0) - returned:+.1f}s from the return; {watch.visible()} of {len(feeder.sent_at)} visible")
        print(f"\n{fault} {seconds:g}s: the stream delivers again {back:.2f}s after the return")
        time.sleep(2)
    finally:
        sent = feeder.stop()
        caught_up = watch.wait_for(sent, 90)
        stop_s = stop_in_time(query)
        watch.stop()
    print(f"stop() {stop_s:.1f}s; {watch.visible()} of {sent} visible")
    assert caught_up, f"only {watch.visible()} of {sent} records visible 90 s after the feeder stopped"
    assert not exactly_once_problems(feeder, watch), exactly_once_problems(feeder, watch)


@pytest.mark.parametrize("seconds", [2.0, 10.0])
def test_a_stream_delivers_again_soon_after_a_network_outage(spark: SparkSession, proxied: ProxiedKafka, tmp_path: Path,
                                                              seconds: float) -> None:
    through_fault(spark, proxied, tmp_path, OUTAGE, seconds)


def test_a_stream_delivers_again_soon_after_its_broker_crashed(spark: SparkSession, proxied: ProxiedKafka, tmp_path: Path) -> None:
    through_fault(spark, proxied, tmp_path, "crash", 1.0)
