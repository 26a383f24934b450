"""start_transactional_producer on a real broker: the warm-up before init_transactions changes how long a
start takes, never what it does (fencing, errors). How long it takes is measured by the benchmarks."""

from __future__ import annotations

import socket
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException

from spark_kafka_eos._internal.txn.transactional_producer import start_transactional_producer
from tests.harness.kafka import KafkaTestCluster


def _config(bootstrap: str, transactional_id: str) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "transactional.id": transactional_id}


def test_a_started_producer_commits_and_fences_the_earlier_holder_of_its_id(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic()
    txn_id = f"start-{uuid.uuid4().hex[:8]}"
    first = start_transactional_producer(_config(kafka.bootstrap_servers, txn_id), topic, 30)
    first.begin_transaction()
    first.produce(topic, b"from-the-first")
    first.flush(30)

    second = start_transactional_producer(_config(kafka.bootstrap_servers, txn_id), topic, 30)
    second.begin_transaction()
    second.produce(topic, b"from-the-second")
    second.commit_transaction(30)

    with pytest.raises(KafkaException) as fenced:
        first.commit_transaction(30)
    assert fenced.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    kafka.wait_until_stable(topic)
    assert [r.value for r in kafka.read_committed(topic)] == [b"from-the-second"]


def test_a_warm_up_on_a_topic_that_does_not_exist_still_starts(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic()
    producer = start_transactional_producer(
        {**_config(kafka.bootstrap_servers, f"start-{uuid.uuid4().hex[:8]}"), "allow.auto.create.topics": False},
        f"missing-{uuid.uuid4().hex[:8]}", 30,
    )
    producer.begin_transaction()
    producer.produce(topic, b"v")
    producer.commit_transaction(30)
    kafka.wait_until_stable(topic)
    assert [r.value for r in kafka.read_committed(topic)] == [b"v"]


def test_no_broker_fails_with_init_transactions_error_within_its_timeout() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(KafkaException) as failed:
            start_transactional_producer(_config(f"127.0.0.1:{port}", f"start-{uuid.uuid4().hex[:8]}"), "any", 3)
    assert failed.value.args[0].code() == KafkaError._TIMED_OUT
