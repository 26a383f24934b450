"""The project's own broker starts on a data directory whose cluster id begins with "-"; the session broker's
watchdog restarts a broker that something outside the tests SIGKILLed, on its data, and says so."""

import os
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.harness.broker_watchdog import BrokerWatchdog
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.local_kafka import LocalKafka


@pytest.mark.long
def test_a_cluster_id_with_a_leading_dash_is_formatted(tmp_path: Path) -> None:
    data_dir = tmp_path / "kafka"
    data_dir.mkdir()
    (data_dir / "cluster.id").write_text("-" + "A" * 21)  # as an older data directory may hold
    with LocalKafka(data_dir) as broker:
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=30)
        assert metadata.cluster_id == "-" + "A" * 21


@pytest.mark.long  # two broker starts (23 to 66 s): the tests' own scaffolding, not the product
def test_the_watchdog_restarts_a_broker_killed_from_outside_on_its_data(tmp_path: Path) -> None:
    report = tmp_path / "broker-deaths.log"
    with LocalKafka(tmp_path / "kafka") as broker:
        watchdog = BrokerWatchdog(broker, report).start()
        try:
            cluster = KafkaTestCluster(broker.bootstrap_servers)
            topic = cluster.create_topic(1)
            cluster.produce_plain(topic, [Sent(0, None, b"before")])
            assert broker._process is not None
            killed = broker._process.pid
            os.kill(killed, signal.SIGKILL)
            deadline = time.monotonic() + 120
            while watchdog.restarts == 0 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert watchdog.restarts == 1 and broker.running
            assert [r.value for r in cluster.read_committed(topic)] == [b"before"]
            assert f"(pid {killed}) ended with code -9" in report.read_text()
        finally:
            watchdog.stop()
