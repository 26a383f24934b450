"""What a process keeps of a cluster (``spark_kafka_eos._internal.cluster.CLIENTS``): kept between uses, and made
anew after ``invalidate``."""

from __future__ import annotations

import pytest

from spark_kafka_eos._internal.cluster import CLIENTS, ClusterClients, admin_client, cached_session, known_topic, remember_topic
from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.config.writer import parse_writer_options
from tests.harness.kafka import KafkaTestCluster

pytestmark = pytest.mark.kafka


def connection_of(kafka: KafkaTestCluster) -> KafkaConnection:
    options = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": "t", "transactional.id.prefix": "clients"}
    return parse_writer_options(options, streaming=False).connection


def test_clients_are_kept_until_the_cluster_is_invalidated(kafka: KafkaTestCluster) -> None:
    connection = connection_of(kafka)
    clients = ClusterClients()
    session, admin = clients.session(connection), clients.admin(connection)[0]
    reader = clients.group_reader(connection, "g")
    topic = kafka.create_topic()
    clients.set_topic_known(connection, topic, True)
    assert clients.session(connection) is session and clients.admin(connection)[0] is admin
    assert clients.group_reader(connection, "g") is reader and clients.topic_known(connection, topic)
    assert session.describe(["clients-none"])["clients-none"] is not None

    clients.invalidate(connection)

    assert clients.session(connection) is not session and clients.admin(connection)[0] is not admin
    assert clients.group_reader(connection, "g") is not reader and not clients.topic_known(connection, topic)
    with pytest.raises(RuntimeError):
        reader.committed([], timeout=1)  # closed
    clients.close()


def test_the_module_functions_use_the_process_wide_clients(kafka: KafkaTestCluster) -> None:
    connection = connection_of(kafka)
    assert cached_session(connection) is CLIENTS.session(connection)
    assert admin_client(connection) is CLIENTS.admin(connection)[0]
    topic = kafka.create_topic()
    remember_topic(connection, topic)
    assert known_topic(connection, topic) and CLIENTS.topic_known(connection, topic)
