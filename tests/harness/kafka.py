"""Test helpers on a real Kafka cluster: topics, transactional traffic, and an independent
read_committed consumer that says what a correct reader must return.

None of this uses spark_kafka_eos: it is the yardstick the connector is measured against.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class KafkaRecord:
    """One record as the independent consumer saw it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] | None = None
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class Sent:
    """One record a test produced, and whether its transaction committed."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] | None = None
    timestamp_ms: int | None = None


@dataclass
class OpenTransaction:
    """A transaction left open on purpose; commit() or abort() decides it later and waits
    until its markers are written (the LSO moves only then)."""

    cluster: KafkaTestCluster
    topic: str
    producer: Producer
    sent: list[Sent] = field(default_factory=list)

    def commit(self) -> list[Sent]:
        self.producer.commit_transaction(30)
        self.cluster.wait_until_stable(self.topic)
        return self.sent

    def abort(self) -> list[Sent]:
        self.producer.abort_transaction(30)
        self.cluster.wait_until_stable(self.topic)
        return []


_counter = itertools.count()

# Answers of a broker that does not (yet) know the partition's leader: a newly created topic, a leader moving.
_LEADER_MOVING = frozenset({
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.REPLICA_NOT_AVAILABLE,
})


class KafkaTestCluster:
    """A handle on the test session's Kafka cluster."""

    def __init__(self, bootstrap_servers: str, replication_factor: int = 1) -> None:
        """``replication_factor``: of the topics this handle creates (3 on a three-broker cluster)."""
        self.bootstrap_servers = bootstrap_servers
        self.replication_factor = replication_factor
        self.admin = AdminClient({"bootstrap.servers": bootstrap_servers})

    # -- topics -------------------------------------------------------------------------
    def create_topic(self, partitions: int = 1, prefix: str = "t", config: dict[str, str] | None = None) -> str:
        """Create a topic with a unique name and wait until every partition has a leader."""
        name = f"{prefix}-{next(_counter)}-{uuid.uuid4().hex[:8]}"
        futures = self.admin.create_topics(
            [NewTopic(name, partitions, self.replication_factor, config=config or {})], operation_timeout=30
        )
        futures[name].result(30)
        self._wait_for_partitions(name, partitions)
        return name

    def recreate_topic(self, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
        """Delete ``topic`` and create it again, empty, with ``partitions`` partitions (and ``config``): its
        offsets start again at 0 (what a topic re-created while a query is down looks like)."""
        self.delete_topic(topic)
        deadline = time.monotonic() + 30
        while True:
            try:
                new = NewTopic(topic, partitions, self.replication_factor, config=config or {})
                self.admin.create_topics([new], operation_timeout=30)[topic].result(30)
                break
            except KafkaException as err:
                # The deletion may not have finished on the controller yet.
                if err.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self._wait_for_partitions(topic, partitions)

    def add_partitions(self, topic: str, total: int) -> None:
        self.admin.create_partitions([NewPartitions(topic, total)])[topic].result(30)
        self._wait_for_partitions(topic, total)

    def delete_records(self, topic: str, before: dict[int, int]) -> None:
        """Move each partition's log start offset to ``before[partition]``, as retention does."""
        futures = self.admin.delete_records([TopicPartition(topic, p, o) for p, o in before.items()], operation_timeout=30)
        for future in futures.values():
            future.result(30)

    def delete_topic(self, topic: str) -> None:
        self.admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
        deadline = time.monotonic() + 30
        while topic in self.admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
            time.sleep(0.2)

    def _wait_for_partitions(self, topic: str, partitions: int) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            meta = self.admin.list_topics(topic, timeout=10).topics.get(topic)
            if meta is not None and meta.error is None and len(meta.partitions) == partitions and all(
                p.leader >= 0 for p in meta.partitions.values()
            ):
                return
            time.sleep(0.1)
        raise TimeoutError(f"topic {topic} did not get {partitions} partitions with leaders")

    # -- producing ----------------------------------------------------------------------
    def producer(self, transactional_id: str | None = None, **config: object) -> Producer:
        conf: dict[str, object] = {"bootstrap.servers": self.bootstrap_servers, "linger.ms": 0}
        if transactional_id:
            conf["transactional.id"] = transactional_id
        conf.update({k.replace("_", "."): v for k, v in config.items()})
        producer = Producer(conf)
        if transactional_id:
            producer.init_transactions(30)
        return producer

    def produce_plain(self, topic: str, records: Iterable[Sent]) -> list[Sent]:
        """Produce non-transactional records; they are visible at once."""
        producer = self.producer()
        sent = list(records)
        for record in sent:
            _produce(producer, topic, record)
        assert producer.flush(30) == 0
        return sent

    def open_transaction(self, topic: str, records: Iterable[Sent], transactional_id: str | None = None) -> OpenTransaction:
        """Begin a transaction, produce and flush its records, and leave it open."""
        producer = self.producer(transactional_id or f"test-txn-{uuid.uuid4().hex[:10]}")
        producer.begin_transaction()
        txn = OpenTransaction(self, topic, producer)
        for record in records:
            _produce(producer, topic, record)
            txn.sent.append(record)
        assert producer.flush(30) == 0
        return txn

    def write_interleaved(
        self,
        topic: str,
        partitions: Sequence[int],
        producers: int = 3,
        transactions: int = 4,
        records_per_transaction: int = 5,
        abort: Callable[[int, int], bool] | None = None,
        plain_between: int = 2,
    ) -> list[Sent]:
        """Several transactional producers write concurrently open transactions, interleaved
        record by record (each flushed, so each is its own batch) with non-transactional
        records; ``abort(producer_index, transaction_index)`` says which transactions abort
        (default: every third). Returns the records a read_committed reader must see."""
        abort = abort or (lambda p, t: (p + t) % 3 == 1)
        txn_producers = [self.producer(f"interleave-{uuid.uuid4().hex[:10]}-{i}") for i in range(producers)]
        plain = self.producer()
        committed: list[Sent] = []
        for t in range(transactions):
            pending: list[list[Sent]] = [[] for _ in txn_producers]
            for producer in txn_producers:
                producer.begin_transaction()
            for r in range(records_per_transaction):
                for p, producer in enumerate(txn_producers):
                    partition = partitions[(p + r) % len(partitions)]
                    record = Sent(partition, f"p{p}-t{t}-r{r}".encode(), f"v-{p}-{t}-{r}".encode())
                    _produce(producer, topic, record)
                    producer.flush(30)
                    pending[p].append(record)
                for k in range(plain_between):
                    record = Sent(partitions[(r + k) % len(partitions)], None, f"plain-{t}-{r}-{k}".encode())
                    _produce(plain, topic, record)
                    plain.flush(30)
                    committed.append(record)
            for p, producer in enumerate(txn_producers):
                if abort(p, t):
                    producer.abort_transaction(30)
                else:
                    producer.commit_transaction(30)
                    committed.extend(pending[p])
        self.wait_until_stable(topic)
        return committed

    def wait_until_stable(self, topic: str, timeout_s: float = 30.0) -> None:
        """Wait until the LSO of every partition reaches its high watermark. commit_transaction
        returns once the coordinator logged the decision; the markers that move the LSO are
        written after that, so a read right after a commit may not see it yet."""
        deadline = time.monotonic() + timeout_s
        while True:
            stable = self.offsets(topic, OffsetSpec.latest())
            written = self.offsets(topic, OffsetSpec.latest(), committed=False)
            if stable == written:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: LSO {stable} did not reach the high watermark {written}")
            time.sleep(0.05)

    # -- consuming ----------------------------------------------------------------------
    def partitions_of(self, topic: str) -> list[int]:
        meta = self.admin.list_topics(topic, timeout=10).topics[topic]
        return sorted(meta.partitions)

    def offsets(self, topic: str, spec: OffsetSpec, committed: bool = True, timeout_s: float = 30.0) -> dict[int, int]:
        """Per-partition offsets: OffsetSpec.latest() with committed=True is the LSO. A retriable answer (a
        leader not yet known to the broker asked, right after the topic was created or a leader moved) is
        asked again until ``timeout_s``."""
        level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
        deadline = time.monotonic() + timeout_s
        while True:
            request = {TopicPartition(topic, p): spec for p in self.partitions_of(topic)}
            result = self.admin.list_offsets(request, isolation_level=level, request_timeout=30)
            try:
                return {tp.partition: fut.result(30).offset for tp, fut in result.items()}
            except KafkaException as err:
                error = err.args[0]
                if not (error.retriable() or error.code() in _LEADER_MOVING) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def group_offsets(self, group: str, topic: str) -> dict[int, int]:
        """The committed offsets of ``group`` on each partition of ``topic`` (-1001 where it has none)."""
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in self.partitions_of(topic)])
        result = self.admin.list_consumer_group_offsets([request])[group].result(30)
        return {tp.partition: tp.offset for tp in result.topic_partitions}

    def read_committed(self, topic: str, timeout_s: float = 60.0) -> list[KafkaRecord]:
        """Everything a read_committed consumer sees from earliest up to the current LSO."""
        ends = self.offsets(topic, OffsetSpec.latest())
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": f"independent-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.assign([TopicPartition(topic, p, -2) for p in ends])
        out: list[KafkaRecord] = []
        errors: Counter[str] = Counter()  # what the consumer reported instead of records, for a stuck read's message
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                positions = {tp.partition: tp.offset for tp in consumer.position([TopicPartition(topic, p) for p in ends])}
                if all(ends[p] == 0 or positions.get(p, -1) >= ends[p] for p in ends):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"independent consumer stuck at {positions}, ends {ends}; "
                                       f"it reported {dict(errors) or 'no error'}; assignment {consumer.assignment()}")
                for msg in consumer.consume(500, 0.5):
                    if msg.error():
                        errors[str(msg.error())] += 1
                        continue
                    if msg.offset() < ends[msg.partition()]:
                        headers = msg.headers()
                        out.append(
                            KafkaRecord(
                                msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                                tuple(headers) if headers else None, msg.timestamp()[1],
                            )
                        )
        finally:
            consumer.close()
        return sorted(out, key=lambda r: (r.partition, r.offset))


def _produce(producer: Producer, topic: str, record: Sent) -> None:
    producer.produce(
        topic,
        value=record.value,
        key=record.key,
        partition=record.partition,
        headers=list(record.headers) if record.headers else None,
        timestamp=record.timestamp_ms or 0,
    )
