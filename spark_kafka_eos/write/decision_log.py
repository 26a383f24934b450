"""The decision log: a compacted topic, key = transactional id prefix, value = JSON record.

A ``decision`` record, written in the coordinator's own transaction (``<prefix>-coordinator``), is
the commit point of an epoch: once it is committed, every participant it names is committed
eventually (phase 2, or roll-forward by recovery), never aborted. A ``complete`` record follows
when phase 2 is done; from then on the participants' transactional ids may be reused and their
state says nothing about the decided epoch. A ``reset`` record (from the CLI) forgets a prefix.

Writing through ``<prefix>-coordinator`` fences a zombie driver: ``init_transactions`` bumps the
coordinator's epoch, so an older driver's decision can no longer commit.
"""

from __future__ import annotations

import json
import time
from typing import Callable, Mapping, Optional

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import NewTopic, OffsetSpec

from spark_kafka_eos.errors import KafkaEosDecisionLogError
from spark_kafka_eos.options import parse_reader_options
from spark_kafka_eos.read.partition_reader import read_offset_range
from spark_kafka_eos.read.planner import OffsetRange
from spark_kafka_eos.write.log_record import LogRecord
from spark_kafka_eos.write.transactional_id import coordinator_transactional_id
from spark_kafka_eos.write.writer_options import WriterOptions

COORDINATOR_TRANSACTION_TIMEOUT_MS = 60_000
"""The decision transaction only writes one record: a short timeout keeps a crashed driver's
half-written decision from holding the log's LSO for long."""
_LOG_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "min.compaction.lag.ms": "0",
    "segment.ms": "3600000",
    "min.cleanable.dirty.ratio": "0.1",
}

# Log topics seen to exist by this (reused) Python worker: saves a metadata request per epoch.
_EXISTING_TOPICS: set[tuple[str, str]] = set()
_NOT_READY = {
    KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT,
    # A reused admin client whose metadata predates the topic: "Failed to query partition leaders".
    KafkaError._NOENT,
}


class DecisionLog:
    """Reads the last record of a prefix and appends records in the coordinator's transaction."""

    def __init__(self, options: WriterOptions, settle_timeout_s: float = 2 * COORDINATOR_TRANSACTION_TIMEOUT_MS / 1000) -> None:
        self._options = options
        self._topic = options.decision_log_topic
        self._connection = options.connection_config()
        self._admin = options.admin_client()
        self._settle_timeout_s = settle_timeout_s
        self._producer: Optional[Producer] = None

    # -- topic ----------------------------------------------------------------------------
    def ensure_topic(self) -> None:
        """Create the compacted log topic when it is missing; a clear error if that is forbidden."""
        known = (self._options.bootstrap_servers, self._topic)
        if known in _EXISTING_TOPICS:
            return
        metadata = self._admin.list_topics(timeout=30)
        if self._topic in metadata.topics:
            partitions = len(metadata.topics[self._topic].partitions)
            if partitions != 1:
                raise KafkaEosDecisionLogError(
                    f"The decision log topic '{self._topic}' (option decisionLogTopic) has {partitions} partitions; "
                    "it must have exactly 1 (every decision of a prefix is read from partition 0). Fix: name another "
                    f"topic with decisionLogTopic, or recreate it with 1 partition and cleanup.policy=compact."
                )
            _EXISTING_TOPICS.add(known)
            return
        replication = min(3, len(metadata.brokers))
        futures = self._admin.create_topics(
            [NewTopic(self._topic, 1, replication, config=dict(_LOG_TOPIC_CONFIG))], operation_timeout=30
        )
        try:
            futures[self._topic].result(60)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            settings = " ".join(f"--config {k}={v}" for k, v in _LOG_TOPIC_CONFIG.items())
            raise KafkaEosDecisionLogError(
                f"The decision log topic '{self._topic}' (option decisionLogTopic) does not exist and could not be "
                f"created: {error.str()}. Fix: have an administrator create it: kafka-topics --create --topic "
                f"{self._topic} --partitions 1 --replication-factor {replication} {settings}"
            ) from None

    # -- reading --------------------------------------------------------------------------
    def last(self, prefix: str) -> Optional[LogRecord]:
        """The last committed record of ``prefix``, or None. Waits until no transaction is open on
        the log, so a decision just committed (whose markers may still be in flight) is seen."""
        end = self._settled_end()
        if end == 0:
            return None
        reader_options = parse_reader_options(
            # The log is read to its end every epoch: don't let the broker hold the last fetch.
            {"assign": json.dumps({self._topic: [0]}), "kafka.fetch.wait.max.ms": "10",
             **{f"kafka.{k}": v for k, v in self._connection.items()}},
            streaming=False,
        )
        found: Optional[bytes] = None
        for batch in read_offset_range(reader_options, OffsetRange(self._topic, 0, 0, end)):
            for key, value in zip(batch.column("key").to_pylist(), batch.column("value").to_pylist()):
                if key == prefix.encode():
                    found = value
        return LogRecord.from_json(found) if found else None

    def _settled_end(self) -> int:
        deadline = time.monotonic() + self._settle_timeout_s
        tp = KafkaTopicPartition(self._topic, 0)
        while True:
            stable = self._offset(tp, IsolationLevel.READ_COMMITTED)
            written = self._offset(tp, IsolationLevel.READ_UNCOMMITTED)
            if stable == written:
                return stable
            if time.monotonic() > deadline:
                raise KafkaEosDecisionLogError(
                    f"The decision log '{self._topic}' has had an open transaction for {self._settle_timeout_s:g}s "
                    f"(last stable offset {stable}, high watermark {written}): a coordinator of another prefix "
                    "crashed mid-decision. It is aborted by the broker after its transaction timeout; retry then."
                )
            time.sleep(0.02)

    def _offset(self, tp: KafkaTopicPartition, isolation: IsolationLevel, timeout_s: float = 30.0) -> int:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                futures = self._admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=isolation, request_timeout=timeout_s)
                return int(futures[tp].result(timeout_s).offset)
            except KafkaException as exc:
                # A log topic created a moment ago has no leader (epoch) everywhere yet.
                if exc.args[0].code() not in _NOT_READY or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    # -- writing --------------------------------------------------------------------------
    def append(self, record: LogRecord, group_offsets: Optional[Mapping[tuple[str, int], int]] = None,
               before_commit: Optional[Callable[[], None]] = None) -> None:
        """Commit ``record`` (and the consumer group's offsets, when given) in the coordinator's
        transaction. Returns only once it is committed; raises if it is not. ``before_commit`` runs
        once everything is written, before the commit: if it raises, the transaction is aborted."""
        producer = self._coordinator_producer(record.prefix)
        producer.begin_transaction()
        try:
            producer.produce(self._topic, value=record.to_json(), key=record.prefix.encode(), partition=0)
            if group_offsets and record.consumer_group:
                producer.send_offsets_to_transaction(
                    [KafkaTopicPartition(t, p, o) for (t, p), o in sorted(group_offsets.items())],
                    _group_metadata(self._connection, record.consumer_group),
                    30,
                )
            producer.flush(30)
            if before_commit is not None:
                before_commit()
        except Exception:
            _abort_quietly(producer)
            raise
        _commit(producer)

    def fence(self, prefix: str) -> None:
        """Initialise the coordinator's transactional id now: any other (zombie) driver of the
        prefix can no longer commit a decision from here on."""
        self._coordinator_producer(prefix)

    def _coordinator_producer(self, prefix: str) -> Producer:
        """The coordinator's transactional producer, initialised once per log instance (one commit or
        recovery): ``init_transactions`` fences any other driver of the prefix."""
        if self._producer is None:
            txn_id = coordinator_transactional_id(prefix)
            producer = Producer(self._options.producer_config(txn_id, COORDINATOR_TRANSACTION_TIMEOUT_MS))
            producer.init_transactions(30)
            self._producer = producer
        return self._producer


def _group_metadata(connection: Mapping[str, str], group: str) -> object:
    consumer = Consumer({**connection, "group.id": group, "enable.auto.commit": False})
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


def _abort_quietly(producer: Producer) -> None:
    try:
        producer.abort_transaction(30)
    except KafkaException:
        pass  # the broker aborts it after COORDINATOR_TRANSACTION_TIMEOUT_MS


def _commit(producer: Producer, attempts: int = 5) -> None:
    """Commit, retrying retriable errors. An error here leaves the outcome to be read back from
    the log: the caller re-reads it rather than guessing."""
    for attempt in range(attempts):
        try:
            producer.commit_transaction(30)
            return
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.retriable() and attempt + 1 < attempts:
                continue
            if error.txn_requires_abort():
                _abort_quietly(producer)
            raise KafkaEosDecisionLogError(f"The decision could not be committed: {error.str()}") from None
