"""Liveness through a network blip and a broker crash: the stream delivers again soon after, without a restart.

An exactly-once pipeline (``kafka_eos`` source to ``kafka_eos`` sink, 4 partitions, the default trigger) runs with
every connection of its driver and tasks through the fault proxy, while a feeder produces 500 records a second
to its source and an independent read_committed consumer watches its sink, both on the broker's direct listener.
Then the proxy is down for a while (every connection reset, new ones refused), or the broker is killed (-9) and
restarted on its data. The test measures the time from the network's (or broker's) return to the first visible
record sent after it, and fails on a stall: the stream must deliver again without anyone restarting it, and
``query.stop()`` must return. At the end every record is visible exactly once.

The bound here is a stall's, not a speed goal: ``make bench-faults`` prints the time beside Spark's own pipeline's.
The harness is tests/harness/liveness.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.harness.fault_schedule import OUTAGE, Fault
from tests.harness.liveness import CRASH, EXACTLY_ONCE, PART_CLIENTS, FaultRun, through_fault
from tests.harness.proxied_kafka import ProxiedKafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.long]

STALL_S = 20.0
"""A stream not delivering this long after the fault's end is stalled (Spark's own pipeline: about 1.2 s)."""


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedKafka]:
    broker = ProxiedKafka(tmp_path_factory.mktemp("liveness-kafka")).start()
    try:
        yield broker
    finally:
        broker.kill()


def assert_live_and_exactly_once(run: FaultRun) -> None:
    print(f"\n{run.fault}: delivers again {run.back_s}s after its end; stop() {run.stop_s}s; {run.visible} of {run.sent} visible")
    assert run.failure is None, f"the query failed after {run.fault}: {run.failure}"
    assert run.back_s is not None, (f"STALLED: nothing sent after {run.fault} ended is visible {STALL_S:g}s later "
                                    f"({run.visible} of {run.sent} visible)")
    assert run.stop_s is not None, "query.stop() did not return within 60 s: the micro-batch's commit hangs"
    assert run.visible == run.sent and not run.problems, f"not exactly once: {run.problems}"


@pytest.mark.parametrize("engine", ["native", "python"])
@pytest.mark.parametrize("seconds", [2.0, 10.0])
def test_a_stream_delivers_again_soon_after_a_network_outage(spark: SparkSession, proxied: ProxiedKafka, tmp_path: Path,
                                                              seconds: float, engine: str) -> None:
    run = through_fault(spark, proxied, EXACTLY_ONCE, Fault(0.0, OUTAGE, seconds), tmp_path, stall_s=STALL_S, engine=engine)
    assert proxied.proxy.counts().get(OUTAGE) == 1, proxied.proxy.report()
    assert_live_and_exactly_once(run)


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_stream_delivers_again_soon_after_its_broker_crashed(spark: SparkSession, proxied: ProxiedKafka, tmp_path: Path,
                                                               engine: str) -> None:
    assert_live_and_exactly_once(through_fault(spark, proxied, EXACTLY_ONCE, CRASH, tmp_path, stall_s=STALL_S, engine=engine))


@pytest.mark.parametrize("part", ["sink", "reader", "decisions"])
def test_a_stream_delivers_again_soon_after_an_outage_of_one_parts_connections(spark: SparkSession, proxied: ProxiedKafka,
                                                                               tmp_path: Path, part: str) -> None:
    # The sink's task producers, the reader's consumers, or the decision log's producer and transaction session lose
    # their connections for 2 s while the others go on.
    fault = Fault(0.0, OUTAGE, 2.0, clients=PART_CLIENTS[(EXACTLY_ONCE, part)])
    run = through_fault(spark, proxied, EXACTLY_ONCE, fault, tmp_path, stall_s=STALL_S)
    assert run.reached, f"the outage of the {part}'s connections reached none: {proxied.proxy.report()}"
    assert_live_and_exactly_once(run)
