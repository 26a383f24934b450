"""Missing ACLs: a clear error naming the ACL, never a stream that silently reads nothing.

Runs against a second broker that enforces ACLs (tests/harness/secured_kafka.py)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType
from pyspark.sql.streaming.datasource import ReadAllAvailable

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.admission_stream_reader import KafkaEosStreamReader
from spark_kafka_eos._internal.read.partition_reader import read_offset_range
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos.errors import KafkaEosAuthorizationError
from tests.harness.secured_kafka import SecuredKafka, allow

pytestmark = [pytest.mark.kafka]

OPEN, SECRET = "readable", "not-describable"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    broker = SecuredKafka(tmp_path_factory.mktemp("secured-kafka"))
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for topic in (OPEN, SECRET):
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        for future in admin.create_acls(allow(ResourceType.TOPIC, OPEN, AclOperation.READ, AclOperation.DESCRIBE)).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(3):
            producer.produce(OPEN, f"v{i}".encode(), partition=0)
        assert producer.flush(30) == 0
        yield broker
    finally:
        broker.stop()


def options(secured: SecuredKafka, **extra: str) -> dict[str, str]:
    return {k.lower(): v for k, v in {**secured.reader_options(), **extra}.items()}


def test_a_topic_the_principal_may_not_describe_is_an_error_not_an_empty_stream(secured: SecuredKafka) -> None:
    reader = KafkaEosStreamReader(parse_reader_options(options(secured, subscribe=f"{OPEN},{SECRET}"), streaming=True))
    with pytest.raises(KafkaEosAuthorizationError) as refused:
        reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    message = str(refused.value)
    assert f"--allow-principal User:reader --operation Describe --operation Read --topic {SECRET}" in message
    assert "reader-secret" not in message
    assigned = KafkaEosStreamReader(parse_reader_options(options(secured, assign=f'{{"{SECRET}":[0]}}'), streaming=True))
    with pytest.raises(KafkaEosAuthorizationError, match=f"--topic {SECRET}"):
        assigned.initialOffset()


def test_a_refused_consumer_group_does_not_fail_a_read(secured: SecuredKafka, caplog: pytest.LogCaptureFixture, read_engine: str) -> None:
    """The reader's consumer has a random group it never uses; the principal has no ACL on it.
    The range waits on an open transaction until the group refusal has arrived, then completes. The range starts
    at this test's own record: a range that an earlier run (the other engine's) committed would be read at once."""
    watermarks = Consumer({"bootstrap.servers": secured.bootstrap_servers, "group.id": "acl-test-watermarks"})
    start = watermarks.get_watermark_offsets(TopicPartition(OPEN, 0), 30)[1]
    watermarks.close()
    producer = Producer({"bootstrap.servers": secured.bootstrap_servers, "transactional.id": f"acl-test-{read_engine}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(OPEN, b"late", partition=0)
    assert producer.flush(30) == 0
    read_options = parse_reader_options(options(secured, subscribe=OPEN, readEngine=read_engine, **{"kafkaConsumer.pollTimeoutMs": "60000"}), streaming=False)
    rows: list[bytes] = []
    failures: list[BaseException] = []

    def read() -> None:
        try:
            # The record and its commit marker: the range ends only once the transaction commits.
            rows.extend(v for b in read_offset_range(read_options, OffsetRange(OPEN, 0, start, start + 2)) for v in b.column("value").to_pylist())
        except BaseException as err:  # noqa: BLE001 - reported by the test below
            failures.append(err)

    with caplog.at_level(logging.WARNING, logger="spark_kafka_eos._internal.read.partition_reader"):
        reader = threading.Thread(target=read)
        reader.start()
        deadline = time.monotonic() + 60
        while "Group authorization failed" not in caplog.text and reader.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        producer.commit_transaction(30)
        reader.join(60)
    assert failures == []
    assert "Group authorization failed" in caplog.text
    assert rows == [b"late"]
