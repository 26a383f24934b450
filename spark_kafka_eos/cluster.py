"""The cluster as seen from this process: clients and facts a (reused) Python worker keeps, keyed by the
:class:`~spark_kafka_eos.connection.KafkaConnection` they were made with.

Spark reuses Python workers for planning, commits and tasks, so keeping an admin client (whose first request
waits for metadata), a coordinator session (whose IO thread stays) or a fact that changes only when brokers
restart saves round trips in every epoch. Correctness never depends on them: a fresh process asks again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource

from spark_kafka_eos.authentication import AuthenticationWatch, list_topics
from spark_kafka_eos.connection import KafkaConnection
from spark_kafka_eos.librdkafka_config import for_librdkafka
from spark_kafka_eos.txn.session import TransactionSession

_TIMEOUT_S = 30
_ADMIN_CLIENTS: dict[KafkaConnection, AdminClient] = {}
_ADMIN_WATCHES: dict[KafkaConnection, AuthenticationWatch] = {}
_SESSIONS: dict[KafkaConnection, TransactionSession] = {}
_MAX_TRANSACTION_TIMEOUT_MS: dict[KafkaConnection, int] = {}
_EXISTING_TOPICS: set[tuple[KafkaConnection, str]] = set()
_CONSUMERS_LOCK = threading.Lock()
_GROUP_READERS: dict[tuple[KafkaConnection, str], Consumer] = {}
_MAX_GROUP_READERS = 8
_POINT_READERS: dict[KafkaConnection, tuple[Consumer, threading.Lock]] = {}
POINT_READER_GROUP = "kafka-eos-decision-log-reader"
COORDINATOR_MOVING = frozenset({
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
})
"""Group coordinator answers that mean "not yet, ask again": a new cluster, a broker restart, a move."""


def admin_client(connection: KafkaConnection) -> AdminClient:
    """An admin client of the cluster, kept: a new client's first offset request waits for metadata, which
    costs more than the rest of a commit."""
    if connection not in _ADMIN_CLIENTS:
        watch = AuthenticationWatch(connection.client_config())
        _ADMIN_CLIENTS[connection] = AdminClient(for_librdkafka({**connection.client_config(), "error_cb": watch}))
        _ADMIN_WATCHES[connection] = watch
    return _ADMIN_CLIENTS[connection]


def cluster_metadata(connection: KafkaConnection, topic: str | None = None, timeout_s: float = _TIMEOUT_S) -> ClusterMetadata:
    """Metadata from the kept admin client; refused credentials raise ``KafkaEosAuthenticationError`` in seconds."""
    admin = admin_client(connection)
    return list_topics(admin, _ADMIN_WATCHES[connection], timeout_s, topic)


def open_session(connection: KafkaConnection) -> TransactionSession:
    """A new coordinator-RPC session; the caller closes it (``with open_session(...) as session``)."""
    return TransactionSession(connection.bootstrap_servers, connection.client_config())


def cached_session(connection: KafkaConnection) -> TransactionSession:
    """A coordinator-RPC session kept open (tasks use it on every epoch); never close it."""
    if connection not in _SESSIONS:
        _SESSIONS[connection] = open_session(connection)
    return _SESSIONS[connection]


@contextmanager
def shared_session(connection: KafkaConnection) -> Iterator[TransactionSession]:
    """:func:`cached_session` as a context manager that leaves it open: a driver's coordinator uses it at
    every micro-batch, and a new session costs a connection and coordinator lookups (~6 ms) each time."""
    yield cached_session(connection)


def max_transaction_timeout_ms(connection: KafkaConnection) -> int:
    """``transaction.max.timeout.ms`` of a broker of the cluster: a broker setting that changes only on restart."""
    if connection not in _MAX_TRANSACTION_TIMEOUT_MS:
        admin = admin_client(connection)
        broker_id = next(iter(cluster_metadata(connection).brokers))
        resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
        configs = admin.describe_configs([resource], request_timeout=_TIMEOUT_S)[resource].result(_TIMEOUT_S)
        _MAX_TRANSACTION_TIMEOUT_MS[connection] = int(configs["transaction.max.timeout.ms"].value)
    return _MAX_TRANSACTION_TIMEOUT_MS[connection]


def known_topic(connection: KafkaConnection, topic: str) -> bool:
    """True once :func:`remember_topic` was told that ``topic`` exists and is well configured."""
    return (connection, topic) in _EXISTING_TOPICS


def remember_topic(connection: KafkaConnection, topic: str) -> None:
    """``topic`` exists and is well configured: :func:`known_topic` says so from now on."""
    _EXISTING_TOPICS.add((connection, topic))


def forget_topic(connection: KafkaConnection, topic: str) -> None:
    """``topic`` may have been deleted or re-created: :func:`known_topic` asks Kafka again."""
    _EXISTING_TOPICS.discard((connection, topic))


def group_offset_reader(connection: KafkaConnection, group: str) -> Consumer:
    """A read_committed consumer of ``group`` (never subscribed, so never a member), kept (the last few
    groups): its ``committed()`` reads the group's stable offsets, its metadata joins a transaction.

    Not AdminClient.list_consumer_group_offsets: librdkafka <= 2.16 crashes the process when that request
    meets NOT_COORDINATOR (librdkafka issue #5040), e.g. while the group coordinator moves."""
    key = (connection, group)
    with _CONSUMERS_LOCK:
        consumer = _GROUP_READERS.get(key)
        if consumer is None:
            if len(_GROUP_READERS) >= _MAX_GROUP_READERS:
                _GROUP_READERS.pop(next(iter(_GROUP_READERS))).close()
            consumer = Consumer(for_librdkafka({**connection.client_config(), "group.id": group, "isolation.level": "read_committed",
                                 "enable.auto.commit": False,
                                 # OffsetFetch is retried while the markers of a commit that just returned
                                 # are on their way (a few ms): the default 100 ms backoff would double a commit.
                                 "retry.backoff.ms": 5, "retry.backoff.max.ms": 100}))
            _GROUP_READERS[key] = consumer
        return consumer


def committed_offsets(connection: KafkaConnection, group: str, partitions: Sequence[TopicPartition],
                      timeout_s: float) -> list[TopicPartition]:
    """``group``'s stable committed offsets of ``partitions`` (each with its own ``error``). A group
    coordinator that is loading or moving is waited for, within ``timeout_s``: librdkafka returns
    NOT_COORDINATOR to ``committed()`` instead of retrying it. Other errors raise ``KafkaException``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return group_offset_reader(connection, group).committed(list(partitions), timeout=max(deadline - time.monotonic(), 0.1))
        except KafkaException as exc:
            if exc.args[0].code() not in COORDINATOR_MOVING or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def point_reader(connection: KafkaConnection) -> tuple[Consumer, threading.Lock]:
    """A read_uncommitted consumer for single records at known offsets, kept (a new consumer's first fetch
    waits for a connection and metadata), with the lock its user holds while it assigns and polls."""
    with _CONSUMERS_LOCK:
        if connection not in _POINT_READERS:
            _POINT_READERS[connection] = (Consumer(for_librdkafka({
                **connection.client_config(), "group.id": POINT_READER_GROUP, "enable.auto.commit": False,
                "isolation.level": "read_uncommitted", "enable.partition.eof": True, "auto.offset.reset": "error",
                "fetch.wait.max.ms": 10,
            })), threading.Lock())
        return _POINT_READERS[connection]
