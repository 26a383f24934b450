"""The cluster as seen from this process: clients and facts a (reused) Python worker keeps, keyed by the
:class:`~spark_kafka_eos._internal.config.connection.KafkaConnection` they were made with, in one :class:`ClusterClients`
(``CLIENTS``).

Spark reuses Python workers for planning, commits and tasks, so keeping an admin client (whose first request
waits for metadata), a coordinator session (whose IO thread stays) or a fact that changes only when brokers
restart saves round trips in every epoch. Correctness never depends on them: a fresh process asks again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource

from spark_kafka_eos._internal.authentication import AuthenticationWatch, list_topics
from spark_kafka_eos._internal.bounded_cache import BoundedCache
from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.config.librdkafka import for_librdkafka
from spark_kafka_eos._internal.retry import COORDINATOR_MOVING, REQUEST_TIMEOUT_S, retry_kafka

if TYPE_CHECKING:
    from spark_kafka_eos._internal.txn.session import TransactionSession

_MAX_GROUP_READERS = 8
POINT_READER_GROUP = "kafka-eos-decision-log-reader"


class ClusterClients:
    """Every client and fact this process keeps, per cluster. Its getters make a client on first use and
    keep it; :meth:`invalidate` closes and forgets what it holds of one cluster, :meth:`close` of all.

    It holds: per cluster an admin client (with the watch that tells refused credentials), a coordinator
    session, the brokers' maximum transaction timeout, the topics known to exist, a point reader; and group
    offset readers for the last few (cluster, group) pairs."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._admins: dict[KafkaConnection, tuple[AdminClient, AuthenticationWatch]] = {}
        self._sessions: dict[KafkaConnection, TransactionSession] = {}
        self._max_transaction_timeouts_ms: dict[KafkaConnection, int] = {}
        self._existing_topics: set[tuple[KafkaConnection, str]] = set()
        self._group_readers: BoundedCache[tuple[KafkaConnection, str], Consumer] = BoundedCache(_MAX_GROUP_READERS, on_drop=Consumer.close)
        self._point_readers: dict[KafkaConnection, tuple[Consumer, threading.Lock]] = {}

    def admin(self, connection: KafkaConnection) -> tuple[AdminClient, AuthenticationWatch]:
        """The admin client of the cluster and its authentication watch."""
        with self._lock:
            if connection not in self._admins:
                watch = AuthenticationWatch(connection.client_config())
                self._admins[connection] = (AdminClient(for_librdkafka({**connection.client_config(), "error_cb": watch})), watch)
            return self._admins[connection]

    def renew_admin(self, connection: KafkaConnection) -> AdminClient:
        """Replace the kept admin client of the cluster with a new one. Its metadata may name a broker that died a
        moment ago as the controller, which librdkafka waits for until a request times out; a new client asks the
        live brokers."""
        with self._lock:
            self._admins.pop(connection, None)  # an AdminClient has no close(); dropping it frees it
        return self.admin(connection)[0]

    def session(self, connection: KafkaConnection) -> TransactionSession:
        """The kept coordinator-RPC session of the cluster; never close it."""
        with self._lock:
            if connection not in self._sessions:
                self._sessions[connection] = open_session(connection)
            return self._sessions[connection]

    def max_transaction_timeout_ms(self, connection: KafkaConnection) -> int:
        with self._lock:
            known = self._max_transaction_timeouts_ms.get(connection)
        if known is None:
            admin = admin_client(connection)
            broker_id = next(iter(cluster_metadata(connection).brokers))
            resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
            configs = admin.describe_configs([resource], request_timeout=REQUEST_TIMEOUT_S)[resource].result(REQUEST_TIMEOUT_S)
            known = int(configs["transaction.max.timeout.ms"].value)
            with self._lock:
                self._max_transaction_timeouts_ms[connection] = known
        return known

    def topic_known(self, connection: KafkaConnection, topic: str) -> bool:
        with self._lock:
            return (connection, topic) in self._existing_topics

    def set_topic_known(self, connection: KafkaConnection, topic: str, known: bool) -> None:
        with self._lock:
            if known:
                self._existing_topics.add((connection, topic))
            else:
                self._existing_topics.discard((connection, topic))

    def group_reader(self, connection: KafkaConnection, group: str) -> Consumer:
        """A read_committed consumer of ``group`` (never subscribed, so never a member)."""
        with self._lock:
            consumer = self._group_readers.get((connection, group))
            if consumer is None:
                consumer = Consumer(for_librdkafka({**connection.client_config(), "group.id": group, "isolation.level": "read_committed",
                                     "enable.auto.commit": False,
                                     # OffsetFetch is retried while the markers of a commit that just returned
                                     # are on their way (a few ms): the default 100 ms backoff would double a commit.
                                     "retry.backoff.ms": 5, "retry.backoff.max.ms": 100}))
                self._group_readers.put((connection, group), consumer)
            return consumer

    def point_reader(self, connection: KafkaConnection) -> tuple[Consumer, threading.Lock]:
        """A read_uncommitted consumer for single records at known offsets, with the lock its user holds."""
        with self._lock:
            if connection not in self._point_readers:
                self._point_readers[connection] = (Consumer(for_librdkafka({
                    **connection.client_config(), "group.id": POINT_READER_GROUP, "enable.auto.commit": False,
                    "isolation.level": "read_uncommitted", "enable.partition.eof": True, "auto.offset.reset": "error",
                    "fetch.wait.max.ms": 10,
                })), threading.Lock())
            return self._point_readers[connection]

    def invalidate(self, connection: KafkaConnection) -> None:
        """Close and forget every client and fact of the cluster: the next use makes them anew."""
        with self._lock:
            self._admins.pop(connection, None)  # an AdminClient has no close(); dropping it frees it
            session = self._sessions.pop(connection, None)
            self._max_transaction_timeouts_ms.pop(connection, None)
            self._existing_topics = {known for known in self._existing_topics if known[0] != connection}
            for key in [key for key in self._group_readers.keys() if key[0] == connection]:
                reader = self._group_readers.take(key)
                if reader is not None:
                    reader.close()
            point = self._point_readers.pop(connection, None)
        if session is not None:
            session.close()
        if point is not None:
            with point[1]:
                point[0].close()

    def close(self) -> None:
        """Close and forget everything kept, of every cluster."""
        with self._lock:
            connections = {*self._admins, *self._sessions, *self._max_transaction_timeouts_ms, *self._point_readers,
                           *(known[0] for known in self._existing_topics), *(key[0] for key in self._group_readers.keys())}
        for connection in connections:
            self.invalidate(connection)


CLIENTS = ClusterClients()
"""What this process keeps of every cluster it uses."""


def admin_client(connection: KafkaConnection) -> AdminClient:
    """An admin client of the cluster, kept: a new client's first offset request waits for metadata, which
    costs more than the rest of a commit."""
    return CLIENTS.admin(connection)[0]


def renew_admin_client(connection: KafkaConnection) -> AdminClient:
    """A new admin client of the cluster, kept from now on (:meth:`ClusterClients.renew_admin`)."""
    return CLIENTS.renew_admin(connection)


def cluster_metadata(connection: KafkaConnection, topic: str | None = None, timeout_s: float = REQUEST_TIMEOUT_S) -> ClusterMetadata:
    """Metadata from the kept admin client; refused credentials raise ``KafkaEosAuthenticationError`` in seconds."""
    admin, watch = CLIENTS.admin(connection)
    return list_topics(admin, watch, timeout_s, topic)


def open_session(connection: KafkaConnection) -> TransactionSession:
    """A new coordinator-RPC session; the caller closes it (``with open_session(...) as session``)."""
    # kafka-python is imported where a session is opened: a reader's task never needs it, and importing it costs
    # every new Python worker a fifth of a second.
    from spark_kafka_eos._internal.txn.session import TransactionSession

    return TransactionSession(connection.bootstrap_servers, connection.client_config())


def cached_session(connection: KafkaConnection) -> TransactionSession:
    """The coordinator-RPC session this process keeps for the cluster (tasks and drivers use it at every
    epoch; a new one costs a connection and coordinator lookups); never close it."""
    return CLIENTS.session(connection)


def max_transaction_timeout_ms(connection: KafkaConnection) -> int:
    """``transaction.max.timeout.ms`` of a broker of the cluster: a broker setting that changes only on restart."""
    return CLIENTS.max_transaction_timeout_ms(connection)


def known_topic(connection: KafkaConnection, topic: str) -> bool:
    """True once :func:`remember_topic` was told that ``topic`` exists and is well configured."""
    return CLIENTS.topic_known(connection, topic)


def remember_topic(connection: KafkaConnection, topic: str) -> None:
    """``topic`` exists and is well configured: :func:`known_topic` says so from now on."""
    CLIENTS.set_topic_known(connection, topic, True)


def forget_topic(connection: KafkaConnection, topic: str) -> None:
    """``topic`` may have been deleted or re-created: :func:`known_topic` asks Kafka again."""
    CLIENTS.set_topic_known(connection, topic, False)


def group_offset_reader(connection: KafkaConnection, group: str) -> Consumer:
    """A read_committed consumer of ``group`` (never subscribed, so never a member), kept (the last few
    groups): its ``committed()`` reads the group's stable offsets, its metadata joins a transaction.

    Not AdminClient.list_consumer_group_offsets: librdkafka <= 2.16 crashes the process when that request
    meets NOT_COORDINATOR (librdkafka issue #5040), e.g. while the group coordinator moves."""
    return CLIENTS.group_reader(connection, group)


def committed_offsets(connection: KafkaConnection, group: str, partitions: Sequence[KafkaTopicPartition],
                      timeout_s: float) -> list[KafkaTopicPartition]:
    """``group``'s stable committed offsets of ``partitions`` (each with its own ``error``). A group
    coordinator that is loading or moving is waited for, within ``timeout_s``: librdkafka returns
    NOT_COORDINATOR to ``committed()`` instead of retrying it. Other errors raise ``KafkaException``."""
    return retry_kafka(lambda deadline: group_offset_reader(connection, group).committed(list(partitions), timeout=deadline.left()),
                       timeout_s, COORDINATOR_MOVING)


def point_reader(connection: KafkaConnection) -> tuple[Consumer, threading.Lock]:
    """A read_uncommitted consumer for single records at known offsets, kept (a new consumer's first fetch
    waits for a connection and metadata), with the lock its user holds while it assigns and polls."""
    return CLIENTS.point_reader(connection)
