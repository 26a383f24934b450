"""A short fault soak (tests/harness/soak.py) on the test session's three-broker cluster: one run of each
process fault (driver, task, executor), and broker crashes. Every run must hit its fault and end exactly
once, with nothing open. The long soak is ``make soak`` (on brokers of its own)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.local_cluster import LocalCluster
from tests.harness.soak import COMMIT_MOMENTS, soak, summary

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.long]


PROCESS_FAULTS = ("driver", "task", "executor")


def test_a_short_soak_of_each_process_fault_is_exactly_once(kafka_cluster: LocalCluster, tmp_path: Path) -> None:
    results = soak(seed=20261122, runs=len(PROCESS_FAULTS), max_minutes=20, records=200, workdir=tmp_path, kinds=PROCESS_FAULTS,
                   existing=kafka_cluster)
    table = summary(results)
    assert sorted(r.kind for r in results) == sorted(PROCESS_FAULTS), table
    assert all(r.hit for r in results), table
    assert all(r.ok for r in results), table


def test_a_short_soak_of_broker_crashes_on_a_three_broker_cluster_is_exactly_once(kafka_cluster: LocalCluster, tmp_path: Path) -> None:
    """Broker crashes at moments where the job stalls inside a write or a commit until the crash has
    happened (the moment's marker is there before the kill), so that each crash meets the job's next
    Kafka call. (``make soak`` also crashes brokers at a random moment while the job reads.)"""
    results = soak(seed=20261123, runs=2, max_minutes=20, records=200, workdir=tmp_path, kinds=("broker",),
                   broker_moments=COMMIT_MOMENTS, existing=kafka_cluster)
    table = summary(results)
    assert len(results) == 2, table
    for result in results:
        moment = result.faults[0].split("@")[1]
        assert moment in COMMIT_MOMENTS, table
        assert any(marker.startswith(moment) for marker in result.fired), table  # the job stood there when the broker died
        assert result.hit and result.broker_killed is not None, table
    assert all(r.ok for r in results), table
