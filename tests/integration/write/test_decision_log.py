"""The decision log's transport at scale, on the real broker: large records, the per-prefix index,
no stall behind another prefix's crashed coordinator, and the topic's cleanup policy."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, OffsetSpec, ResourceType

from spark_kafka_eos._internal.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log import kafka_log as decision_log_module
from spark_kafka_eos._internal.decision_log.coordinator_id import COORDINATOR_TRANSACTION_TIMEOUT_MS, coordinator_transactional_id
from spark_kafka_eos._internal.decision_log.index_group import index_group
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord, Participant
from spark_kafka_eos.errors import KafkaEosDecisionLogError
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.pipeline import open_transactions

pytestmark = pytest.mark.kafka
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588  # broker message.max.bytes, the topics' default max.message.bytes


def log_record(prefix: str, batch: int, tasks: int = 1, partitions: int = 1, consumer_group: str | None = None) -> LogRecord:
    """The one place this module builds a decision-log record (its fields are the record format's business)."""
    participants = tuple(
        Participant(f"{prefix}-0a1b2c3d-0-{task}-0", 10_000 + task, 3, task,
                    tuple((f"orders-enriched-{p % 3}", p, 1_000 + task * p) for p in range(partitions)))
        for task in range(tasks)
    )
    return LogRecord("decision", prefix, str(EpochId.stream("query", batch)), participants, consumer_group)


def log_options(kafka: KafkaTestCluster, log_topic: str, prefix: str = "") -> WriterOptions:
    return parse_writer_options(
        {"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": "unused",
         "transactional.id.prefix": prefix or f"log-{uuid.uuid4().hex[:8]}", "decisionLogTopic": log_topic},
        streaming=False,
    )


def new_log_topic() -> str:
    return f"_decisions-{uuid.uuid4().hex[:8]}"


def open_log(options: WriterOptions) -> KafkaDecisionLog:
    """A decision log as the coordinator opens it: topic checked, prefix fenced."""
    decision_log = KafkaDecisionLog(options)
    decision_log.ensure_topic()
    decision_log.fence(options.prefix)
    return decision_log


def write_like_the_previous_version(kafka: KafkaTestCluster, options: WriterOptions, record: LogRecord) -> None:
    """A record as the log's earlier versions wrote it: key = prefix, value = JSON, no index entry."""
    producer = kafka.producer(coordinator_transactional_id(options.prefix))
    producer.begin_transaction()
    producer.produce(options.decision_log_topic, value=record.to_json(), key=record.prefix.encode(), partition=0)
    producer.commit_transaction(30)


def write_foreign_records(kafka: KafkaTestCluster, topic: str, count: int) -> None:
    kafka.produce_plain(topic, (Sent(0, f"other-{i % 50}".encode(), b'{"kind":"complete"}') for i in range(count)))


@pytest.fixture
def no_scan(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fails the test if the decision log reads its partition with a range read (the full scan)."""
    def scan(*args: object, **kwargs: object) -> None:
        raise AssertionError("the decision log scanned its partition")

    monkeypatch.setattr(decision_log_module, "read_offset_range", scan)
    yield


# -- 1. record size ---------------------------------------------------------------------------
def test_a_decision_of_400_tasks_by_100_partitions_round_trips_within_default_limits(kafka: KafkaTestCluster) -> None:
    options = log_options(kafka, new_log_topic())
    decision_log = open_log(options)
    resource = ConfigResource(ResourceType.TOPIC, options.decision_log_topic)
    config = kafka.admin.describe_configs([resource])[resource].result(30)
    assert int(config["max.message.bytes"].value) == KAFKA_DEFAULT_MAX_MESSAGE_BYTES
    record = log_record(options.prefix, 7, tasks=400, partitions=100)
    assert len(record.to_json()) > KAFKA_DEFAULT_MAX_MESSAGE_BYTES

    decision_log.append(record)

    assert KafkaDecisionLog(options).last(options.prefix) == record
    kafka.wait_until_stable(options.decision_log_topic)
    stored = kafka.read_committed(options.decision_log_topic)
    assert len(stored) > 1 and all(len(r.value or b"") < 1_000_000 for r in stored)


def test_an_aborted_large_decision_leaves_the_last_committed_one_whole(kafka: KafkaTestCluster) -> None:
    options = log_options(kafka, new_log_topic())
    decision_log = open_log(options)
    committed = log_record(options.prefix, 1, tasks=300, partitions=100)
    decision_log.append(committed)
    # The next decision writes the same chunk keys, then its transaction aborts (e.g. the driver was fenced).
    producer = decision_log._coordinator_producer(options.prefix)
    producer.begin_transaction()
    decision_log._produce(producer, log_record(options.prefix, 2, tasks=400, partitions=100))
    producer.abort_transaction(30)

    assert KafkaDecisionLog(options).last(options.prefix) == committed
    smaller = log_record(options.prefix, 3, tasks=200, partitions=100)
    decision_log.append(smaller)
    assert KafkaDecisionLog(options).last(options.prefix) == smaller


def test_compaction_keeps_the_last_decision_whole_after_an_aborted_one(kafka: KafkaTestCluster) -> None:
    """The broker's cleaner runs (superseded records disappear), yet the last committed decision
    stays whole: aborted chunks supersede nothing, committed ones only come with a newer head."""
    log_topic = kafka.create_topic(1, prefix="_decisions", config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "100"})
    options = log_options(kafka, log_topic)
    decision_log = open_log(options)
    last = log_record(options.prefix, 1, tasks=300, partitions=100)
    for record in (log_record(options.prefix, 0, tasks=400, partitions=100), last):
        decision_log.append(record)
        time.sleep(0.2)  # let the segment roll: the cleaner never touches the active one
    producer = decision_log._coordinator_producer(options.prefix)
    producer.begin_transaction()
    decision_log._produce(producer, log_record(options.prefix, 2, tasks=400, partitions=100))
    producer.abort_transaction(30)
    time.sleep(0.2)
    write_foreign_records(kafka, log_topic, 1)

    deadline = time.monotonic() + 120
    while heads_in_log(kafka, log_topic, options.prefix) > 1:
        assert time.monotonic() < deadline, "the log cleaner did not compact the decision log within 120s"
        time.sleep(1)
        write_foreign_records(kafka, log_topic, 1)

    assert KafkaDecisionLog(options).last(options.prefix) == last
    kafka.admin.delete_consumer_groups([index_group(options.prefix)])[index_group(options.prefix)].result(30)
    assert KafkaDecisionLog(options).last(options.prefix) == last  # the scan finds it whole too


def heads_in_log(kafka: KafkaTestCluster, topic: str, prefix: str) -> int:
    kafka.wait_until_stable(topic)
    return sum(1 for r in kafka.read_committed(topic) if r.key == prefix.encode())


# -- 2. the index -----------------------------------------------------------------------------
def test_the_last_record_is_found_through_the_index_without_scanning(kafka: KafkaTestCluster, no_scan: None) -> None:
    options = log_options(kafka, new_log_topic())
    decision_log = open_log(options)
    write_foreign_records(kafka, options.decision_log_topic, 1_000)
    first, second = log_record(options.prefix, 1), log_record(options.prefix, 2, tasks=400, partitions=100)
    decision_log.append(first)
    write_foreign_records(kafka, options.decision_log_topic, 1_000)

    assert KafkaDecisionLog(options).last(options.prefix) == first
    decision_log.append(second)
    assert KafkaDecisionLog(options).last(options.prefix) == second


def test_the_record_a_process_appended_is_its_next_last_without_reading_the_log(
        kafka: KafkaTestCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit reads the prefix's last record a few times; the one this process just appended is known by the
    index entry that points at it, and is not read back."""
    options = log_options(kafka, new_log_topic())
    record = log_record(options.prefix, 1)
    open_log(options).append(record)

    def no_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("the decision log read a record it had just written")

    monkeypatch.setattr(decision_log_module, "_read_at", no_read)
    assert KafkaDecisionLog(options).last(options.prefix) == record


_APPEND_IN_ANOTHER_PROCESS = """
import sys
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.records import LogRecord
from spark_kafka_eos._internal.config.writer import parse_writer_options
bootstrap, log_topic, prefix, record = sys.argv[1:]
options = parse_writer_options({"kafka.bootstrap.servers": bootstrap, "topic": "unused", "transactional.id.prefix": prefix,
                                "decisionLogTopic": log_topic}, streaming=False)
decision_log = KafkaDecisionLog(options)
decision_log.fence(prefix)
decision_log.append(LogRecord.from_json(record.encode()))
"""


def test_a_record_another_driver_appended_is_read_not_the_one_this_process_remembers(kafka: KafkaTestCluster) -> None:
    options = log_options(kafka, new_log_topic())
    mine, theirs = log_record(options.prefix, 1), log_record(options.prefix, 2)
    open_log(options).append(mine)
    assert KafkaDecisionLog(options).last(options.prefix) == mine
    subprocess.run([sys.executable, "-c", _APPEND_IN_ANOTHER_PROCESS, kafka.bootstrap_servers, options.decision_log_topic,
                    options.prefix, theirs.to_json().decode()], check=True, timeout=120)
    assert KafkaDecisionLog(options).last(options.prefix) == theirs


def test_without_an_index_entry_the_log_is_scanned(kafka: KafkaTestCluster) -> None:
    options = log_options(kafka, new_log_topic())
    open_log(options)
    older, newer = log_record(options.prefix, 1), log_record(options.prefix, 2)
    write_like_the_previous_version(kafka, options, older)
    write_foreign_records(kafka, options.decision_log_topic, 100)
    write_like_the_previous_version(kafka, options, newer)
    assert KafkaDecisionLog(options).last(options.prefix) == newer

    # Indexed from the next append on; an index group deleted (or expired) sends it back to the scan.
    latest = log_record(options.prefix, 3)
    open_log(options).append(latest)
    kafka.admin.delete_consumer_groups([index_group(options.prefix)])[index_group(options.prefix)].result(30)
    assert KafkaDecisionLog(options).last(options.prefix) == latest


@pytest.fixture
def scan_starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Where each read_committed range read of the decision log (a scan for a prefix's head) started."""
    starts: list[int] = []
    read = KafkaDecisionLog._read

    def recorded(log: KafkaDecisionLog, start: int, end: int, isolation: str) -> Iterator[pa.RecordBatch]:
        if isolation == "read_committed":
            starts.append(start)
        return read(log, start, end, isolation)

    monkeypatch.setattr(KafkaDecisionLog, "_read", recorded)
    return starts


def test_a_second_scan_of_one_operation_goes_on_from_where_the_first_ended(kafka: KafkaTestCluster, scan_starts: list[int]) -> None:
    """A commit reads an unindexed prefix's last record before its fence and again after it: the second read of a
    log of 100 MB does not start again at offset 0."""
    options = log_options(kafka, new_log_topic())
    open_log(options)
    older, newer = log_record(options.prefix, 1), log_record(options.prefix, 2)
    write_like_the_previous_version(kafka, options, older)
    write_foreign_records(kafka, options.decision_log_topic, 300)
    decision_log = KafkaDecisionLog(options)
    assert decision_log.last(options.prefix) == older
    write_foreign_records(kafka, options.decision_log_topic, 50)
    write_like_the_previous_version(kafka, options, newer)
    assert decision_log.last(options.prefix) == newer
    assert scan_starts[0] == 0 and scan_starts[1] > 300, scan_starts


def test_a_log_re_created_between_two_scans_is_scanned_whole(kafka: KafkaTestCluster, scan_starts: list[int]) -> None:
    options = log_options(kafka, new_log_topic())
    open_log(options)
    write_foreign_records(kafka, options.decision_log_topic, 300)
    decision_log = KafkaDecisionLog(options)
    assert decision_log.last(options.prefix) is None
    kafka.recreate_topic(options.decision_log_topic, config={"cleanup.policy": "compact"})
    record = log_record(options.prefix, 1)
    write_like_the_previous_version(kafka, options, record)  # near offset 0, below where the first scan ended
    kafka.produce_plain(options.decision_log_topic, (Sent(0, f"renewed-{i}".encode(), b"{}") for i in range(400)))
    assert decision_log.last(options.prefix) == record
    assert scan_starts == [0, 0]


def test_an_index_entry_that_does_not_match_the_log_is_not_trusted(kafka: KafkaTestCluster) -> None:
    options = log_options(kafka, new_log_topic())
    decision_log = open_log(options)
    record = log_record(options.prefix, 1)
    decision_log.append(record)
    write_foreign_records(kafka, options.decision_log_topic, 10)
    # As after the log topic was deleted and re-created: the entry points at another record.
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": index_group(options.prefix)})
    try:
        consumer.commit(offsets=[TopicPartition(options.decision_log_topic, 0, 5, metadata="stale")], asynchronous=False)
    finally:
        consumer.close()
    assert KafkaDecisionLog(options).last(options.prefix) == record


def test_the_index_and_a_consumer_group_move_in_the_same_transaction(kafka: KafkaTestCluster, no_scan: None) -> None:
    options = log_options(kafka, new_log_topic())
    decision_log = open_log(options)
    group, source = f"etl-{uuid.uuid4().hex[:8]}", kafka.create_topic(1)
    record = log_record(options.prefix, 1, consumer_group=group)

    decision_log.append(record, {(source, 0): 42})

    assert KafkaDecisionLog(options).last(options.prefix) == record
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "isolation.level": "read_committed"})
    try:
        [offset] = consumer.committed([TopicPartition(source, 0)], timeout=30)
    finally:
        consumer.close()
    assert offset.offset == 42


# -- 3. another prefix's crashed coordinator ----------------------------------------------------
def crashed_coordinator(kafka: KafkaTestCluster, log_topic: str, prefix: str) -> Producer:
    """A coordinator of ``prefix`` that died mid-decision: its transaction on the log stays open."""
    producer = kafka.producer(coordinator_transactional_id(prefix), transaction_timeout_ms=COORDINATOR_TRANSACTION_TIMEOUT_MS)
    producer.begin_transaction()
    producer.produce(log_topic, value=log_record(prefix, 9).to_json(), key=prefix.encode(), partition=0)
    assert producer.flush(30) == 0
    return producer


def log_is_pinned(kafka: KafkaTestCluster, topic: str) -> bool:
    return kafka.offsets(topic, OffsetSpec.latest())[0] < kafka.offsets(topic, OffsetSpec.latest(), committed=False)[0]


def test_a_crashed_coordinator_of_another_prefix_does_not_stall_a_prefix(kafka: KafkaTestCluster) -> None:
    log_topic = new_log_topic()
    crashed, options = log_options(kafka, log_topic), log_options(kafka, log_topic)
    before_crash = log_record(crashed.prefix, 1)
    open_log(crashed).append(before_crash)
    stuck = crashed_coordinator(kafka, log_topic, crashed.prefix)

    decision_log = open_log(options)
    assert decision_log.last(options.prefix) is None  # first use: the scan does not wait for the other prefix
    for batch in range(3):
        record = log_record(options.prefix, batch, tasks=300 if batch == 1 else 1, partitions=100)
        decision_log.append(record)
        assert KafkaDecisionLog(options).last(options.prefix) == record

    # Everything above ran while the other prefix's transaction held the log's LSO.
    assert open_transactions(kafka, crashed.prefix) == [coordinator_transactional_id(crashed.prefix)]
    assert log_is_pinned(kafka, log_topic)
    stuck.abort_transaction(30)
    assert KafkaDecisionLog(crashed).last(crashed.prefix) == before_crash


def test_an_unindexed_record_of_unknown_outcome_is_never_answered_from_a_partial_scan(kafka: KafkaTestCluster) -> None:
    log_topic = new_log_topic()
    crashed, options = log_options(kafka, log_topic), log_options(kafka, log_topic)
    open_log(crashed)
    stuck = crashed_coordinator(kafka, log_topic, crashed.prefix)
    record = log_record(options.prefix, 4)
    write_like_the_previous_version(kafka, options, record)  # committed, but above the pinned LSO

    with pytest.raises(KafkaEosDecisionLogError, match=f"prefix {options.prefix} has records above it"):
        KafkaDecisionLog(options, settle_timeout_s=1).last(options.prefix)
    stuck.abort_transaction(30)
    assert KafkaDecisionLog(options).last(options.prefix) == record


# -- 4. the topic's configuration ---------------------------------------------------------------
@pytest.mark.parametrize("policy", ["delete", "compact,delete"])
def test_a_log_topic_that_deletes_records_is_refused(kafka: KafkaTestCluster, policy: str) -> None:
    log_topic = kafka.create_topic(1, prefix="_decisions", config={"cleanup.policy": policy, "retention.ms": "604800000"})
    options = log_options(kafka, log_topic)
    with pytest.raises(KafkaEosDecisionLogError) as refused:
        KafkaDecisionLog(options).ensure_topic()
    message = str(refused.value)
    assert f"'{log_topic}' (option decisionLogTopic) has cleanup.policy={policy}" in message
    assert (f"kafka-configs --bootstrap-server {kafka.bootstrap_servers} --alter --entity-type topics "
            f"--entity-name {log_topic} --add-config cleanup.policy=compact") in message


def test_a_compacted_log_topic_created_by_an_administrator_is_accepted(kafka: KafkaTestCluster) -> None:
    log_topic = kafka.create_topic(1, prefix="_decisions", config={"cleanup.policy": "compact"})
    options = log_options(kafka, log_topic)
    record = log_record(options.prefix, 1)
    open_log(options).append(record)
    assert KafkaDecisionLog(options).last(options.prefix) == record
