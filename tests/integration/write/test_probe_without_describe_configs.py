"""A principal that may not describe the sink topic's configuration (no DescribeConfigs ACL) on a broker that
enforces ACLs (tests/harness/secured_kafka.py): a probe that compaction removed must read as *cannot be told*,
never as lost. A loss would send the operator to re-run output that is there."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka.admin import AclOperation, AdminClient, ResourcePatternType, ResourceType

from spark_kafka_eos._internal.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.records import LogRecord, Participant
from spark_kafka_eos._internal.txn.session import TransactionSession
from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
from spark_kafka_eos._internal.write.task_producer import TaskIdentity, write_task
from spark_kafka_eos.errors import KafkaEosOutputUnverifiableError
from tests.harness.coordinator import TIMEOUT_MS, stream_epoch
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.secured_kafka import SecuredKafka, allow

pytestmark = pytest.mark.kafka

PREFIX = "no-configs-"
COMPACTED = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
             "min.compaction.lag.ms": "0", "delete.retention.ms": "100"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    """A broker with ACLs; the reader may write and read the sink topics and the decision logs of this module's
    prefixes, but not describe the sink topics' configuration."""
    with SecuredKafka(tmp_path_factory.mktemp("secured-probe")) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        bindings = (allow(ResourceType.TOPIC, f"{PREFIX}sink", AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE,
                          pattern=ResourcePatternType.PREFIXED)
                    + allow(ResourceType.TOPIC, f"{PREFIX}log", AclOperation.ALL, pattern=ResourcePatternType.PREFIXED)
                    + allow(ResourceType.TRANSACTIONAL_ID, PREFIX, AclOperation.ALL, pattern=ResourcePatternType.PREFIXED)
                    + allow(ResourceType.GROUP, "*", AclOperation.ALL))
        for future in admin.create_acls(bindings).values():
            future.result(30)
        yield broker


def reader_options(secured: SecuredKafka, topic: str) -> WriterOptions:
    tag = uuid.uuid4().hex[:8]
    options = {**secured.reader_options(), "topic": topic, "transactional.id.prefix": f"{PREFIX}{tag}",
               "decisionLogTopic": f"{PREFIX}log-{tag}"}
    return parse_writer_options({k.lower(): v for k, v in options.items()}, streaming=True)


def wait_until_compacted_away(kafka: KafkaTestCluster, topic: str, offset: int) -> None:
    """Write records of the probe's key and others until the broker's cleaner has removed the record at ``offset``."""
    deadline = time.monotonic() + 120
    kafka.produce_plain(topic, [Sent(0, b"k", b"later")])
    while any(r.offset == offset for r in kafka.read_committed(topic)):
        assert time.monotonic() < deadline, "the log cleaner did not compact the sink topic within 120s"
        time.sleep(1)
        kafka.produce_plain(topic, [Sent(0, b"filler", b"rolls the segment")])


def test_a_probe_compaction_removed_is_cannot_be_told_not_lost_when_the_cleanup_policy_is_hidden(secured: SecuredKafka) -> None:
    """Phase 2 committed the participant, its id was reused since (so the broker no longer says which transaction
    committed), and compaction removed its first record. The principal cannot read the topic's cleanup policy: the
    missing record may be aborted or compacted, and only "cannot be told" is true."""
    admin = KafkaTestCluster(secured.bootstrap_servers)  # the super user's listener
    topic = admin.create_topic(1, prefix=f"{PREFIX}sink", config=COMPACTED)
    options = reader_options(secured, topic)
    rows = pa.record_batch([pa.array(["k"], pa.string()), pa.array(["first"], pa.string())], names=["key", "value"])
    task = write_task(options, stream_epoch(0), [rows], task=TaskIdentity(0, 0, 0), transaction_timeout_ms=TIMEOUT_MS)
    txn = task.transaction
    assert txn is not None and task.probe == (topic, 0, 0)
    decision_log = KafkaDecisionLog(options)
    decision_log.ensure_topic()
    decision_log.append(LogRecord("decision", options.prefix, str(stream_epoch(0)), (
        Participant(txn.transactional_id, txn.producer_id, txn.producer_epoch, 0, task.records, task.probe, task.probe_digest),)))
    with TransactionSession(secured.bootstrap_servers, request_timeout_s=10) as session:
        session.commit(txn)  # phase 2 ran; the driver died before recording it complete
        session.init_producer_id(txn.transactional_id, TIMEOUT_MS)  # a later task reuses the id
    wait_until_compacted_away(admin, topic, 0)

    with pytest.raises(KafkaEosOutputUnverifiableError) as unverifiable:
        TwoPhaseCommitCoordinator(options, TIMEOUT_MS).prepare()
    message = str(unverifiable.value)
    assert f"cannot be told, the cleanup policy of {topic} cannot be read" in message, message
    assert "LOST" not in message and "re-run it whole" not in message, message
    assert [r.value for r in admin.read_committed(topic) if r.key == b"k"] == [b"later"]
