"""The project's own broker starts on a data directory whose cluster id begins with "-"."""

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.harness.local_kafka import LocalKafka


@pytest.mark.long
def test_a_cluster_id_with_a_leading_dash_is_formatted(tmp_path: Path) -> None:
    data_dir = tmp_path / "kafka"
    data_dir.mkdir()
    (data_dir / "cluster.id").write_text("-" + "A" * 21)  # as an older data directory may hold
    with LocalKafka(data_dir) as broker:
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=30)
        assert metadata.cluster_id == "-" + "A" * 21
