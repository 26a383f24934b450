"""The driver's view of Kafka: which partitions a subscription covers, and their offsets.

One ListOffsets request per question for all partitions at once: earliest, latest (the LSO
under read_committed), or by timestamp.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, OffsetSpec

from spark_kafka_eos._internal.authentication import AuthenticationWatch, list_topics
from spark_kafka_eos._internal.cluster import committed_offsets
from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.config.librdkafka import for_librdkafka
from spark_kafka_eos._internal.config.reader import PartitionKey, ReaderOptions, Subscription
from spark_kafka_eos._internal.read.authorization import topic_authorization_error
from spark_kafka_eos._internal.read.topic_identity import TopicsRefused, describe_topic_ids
from spark_kafka_eos._internal.retry import LOOKUP_RETRIABLE, Backoff, Deadline, kafka_codes, listed_offset, retry
from spark_kafka_eos.errors import KafkaEosOptionError, KafkaEosUnavailableError

log = logging.getLogger(__name__)
T = TypeVar("T")
GroupGuard = Callable[[KafkaConnection, str, Sequence[KafkaTopicPartition]], None]
"""Called with a group's committed offsets (and their metadata) before a read resumes from them."""

INTERNAL_TOPIC_PREFIX = "__"
"""Every Kafka internal topic's name starts with it (Kafka's Topic.isInternal); user topics may too."""
_VANISHED = kafka_codes({KafkaError.UNKNOWN_TOPIC_OR_PART})


class PartitionsVanished(Exception):
    """A look-up answered UNKNOWN_TOPIC_OR_PART for partitions the listing just before named, after
    fetchOffset.numRetries more tries: they were deleted while the driver planned. Internal: the reader plans
    again from a new listing, whose missing partitions then go through failOnDataLoss (see
    :meth:`~spark_kafka_eos._internal.read.reader._KafkaReaderBase._planned`)."""


class KafkaOffsetLookup:
    """Answers the planner's questions with an AdminClient (driver side only; not picklable)."""

    def __init__(self, options: ReaderOptions, group_guard: GroupGuard | None = None) -> None:
        self._options = options
        self._group_guard = group_guard
        self._authentication = AuthenticationWatch(options.admin_config())
        try:
            self._admin = AdminClient(for_librdkafka({**options.admin_config(), "error_cb": self._authentication}))
        except KafkaException as err:
            raise KafkaEosOptionError("kafka.*", f"librdkafka rejected the configuration: {err.args[0].str()}.", "fix or remove that kafka.* option.") from None
        self._timeout_s = options.request_timeout_s
        isolation = options.isolation_level
        self._isolation = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED

    # -- partitions ------------------------------------------------------------------------
    def partitions(self, subscription: Subscription, must_exist: bool) -> list[PartitionKey]:
        """The partitions a subscription reads now. With ``must_exist``, a subscribed topic
        that does not exist is an error; an assigned partition that does not exist always is."""
        metadata = self._metadata()
        existing = {
            name: sorted(t.partitions)
            for name, t in metadata.topics.items()
            if t.error is None or t.error.code() == KafkaError.NO_ERROR
        }
        named = subscription.topics if subscription.kind == "subscribe" else tuple(t for t, _ in subscription.partitions)
        existing.update(self.check_authorized(sorted({t for t in named if t not in existing})))
        if subscription.kind == "subscribe":
            missing = [t for t in subscription.topics if t not in existing]
            if missing and must_exist:
                raise KafkaEosOptionError(
                    "subscribe", f"names topic(s) {', '.join(missing)}, which do not exist on {self._options.bootstrap_servers}.",
                    "check the topic names, or create the topics first.",
                )
            return [(t, p) for t in subscription.topics if t in existing for p in existing[t]]
        if subscription.kind == "subscribePattern":
            # Found anywhere in the name, as Spark's source does (Scala's findFirstIn): anchor it with ^...$ for a
            # whole name.
            pattern = re.compile(subscription.pattern or "")
            matching = [t for t in sorted(existing) if pattern.search(t)]
            left_out = self._internal_or_gone([t for t in matching if t.startswith(INTERNAL_TOPIC_PREFIX)])
            return [(t, p) for t in matching if t not in left_out for p in existing[t]]
        absent = [tp for tp in subscription.partitions if tp[1] not in existing.get(tp[0], [])]
        if absent and not must_exist:
            # A stream's partitions that vanished since it started: the caller applies failOnDataLoss.
            return [tp for tp in subscription.partitions if tp not in absent]
        if absent:
            details = "; ".join(
                f"{t}-{p} (topic {t} {'has partitions 0..' + str(max(existing[t])) if existing.get(t) else 'does not exist'})"
                for t, p in absent
            )
            raise KafkaEosOptionError("assign", f"names partitions that do not exist: {details}.", "assign only existing partitions.")
        return list(subscription.partitions)

    def _internal_or_gone(self, topics: Sequence[str]) -> set[str]:
        """Of ``topics``, Kafka's internal ones (the metadata's is_internal flag: __consumer_offsets,
        __transaction_state, __share_group_state), which a pattern never reads, as in Spark (its admin
        client's listTopics leaves them out), and those deleted since the metadata was taken. Every
        internal topic's name starts with ``__``: only such names are asked about, so a pattern that
        matches none costs no request."""
        if not topics:
            return set()

        def request() -> set[str]:
            futures = self._admin.describe_topics(TopicCollection(list(topics)), request_timeout=self._timeout_s)
            left_out = set()
            for topic, future in futures.items():
                try:
                    if future.result(self._timeout_s).is_internal:
                        left_out.add(topic)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                        raise
                    left_out.add(topic)  # deleted in between: not there to read
            return left_out

        return self._retrying("describe topics", request)

    def topic_ids(self, topics: Sequence[str]) -> dict[str, str]:
        """Each of ``topics``' id (KIP-516, base64 as Kafka's tools print it); a topic deleted meanwhile is left out."""
        if not topics:
            return {}
        try:
            return self._retrying("describe topics", lambda: describe_topic_ids(self._admin, topics, self._timeout_s))
        except TopicsRefused as refused:  # its ACLs removed since the metadata named it
            raise topic_authorization_error(self._options, refused.topics, str(refused)) from None

    def check_authorized(self, topics: Sequence[str]) -> dict[str, list[int]]:
        """Topics the principal may not describe are left out of the cluster's metadata: ask for
        each missing one by name, which says so, rather than take it for absent. (A pattern's topic
        that the query reads and that its principal may no longer describe, too: see the stream reader.)
        Returns the partitions of those that the answer by name shows (left out of a listing by a broker whose
        metadata lags): they are there, not vanished."""
        refused, visible = [], {}
        for topic in topics:
            answer = self._retrying("describe topic", lambda: self._admin.list_topics(topic, timeout=self._timeout_s))
            meta = answer.topics.get(topic)
            if meta is not None and meta.error is not None and meta.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                refused.append(topic)
            elif meta is not None and (meta.error is None or meta.error.code() == KafkaError.NO_ERROR) and meta.partitions:
                visible[topic] = sorted(meta.partitions)
        if refused:
            raise topic_authorization_error(self._options, refused, "TOPIC_AUTHORIZATION_FAILED on metadata")
        return visible

    def _metadata(self) -> ClusterMetadata:
        def request() -> ClusterMetadata:
            return list_topics(self._admin, self._authentication, self._timeout_s)

        return self._retrying("list topics", request)

    # -- offsets ---------------------------------------------------------------------------
    def earliest(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        return self._list_offsets({tp: OffsetSpec.earliest() for tp in partitions})

    def latest(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        return self._list_offsets({tp: OffsetSpec.latest() for tp in partitions})

    def log_end(self, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
        """The high watermark, whatever the isolation level: where each partition's log ends."""
        return self._list_offsets({tp: OffsetSpec.latest() for tp in partitions}, IsolationLevel.READ_UNCOMMITTED)

    def for_timestamps(self, timestamps: Mapping[PartitionKey, int]) -> dict[PartitionKey, int | None]:
        found = self._list_offsets({tp: OffsetSpec.for_timestamp(ts) for tp, ts in timestamps.items()})
        return {tp: (offset if offset >= 0 else None) for tp, offset in found.items()}

    def committed(self, group: str, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int | None]:
        if not partitions:
            return {}

        def request() -> list[KafkaTopicPartition]:
            # A group consumer's committed(), not AdminClient.list_consumer_group_offsets: see group_offset_reader.
            found = committed_offsets(self._options.connection, group, [KafkaTopicPartition(t, p) for t, p in partitions], self._timeout_s)
            for tp in found:
                if tp.error is not None:
                    raise KafkaException(tp.error)
            return found

        found = self._retrying("list consumer group offsets", request)
        if self._group_guard is not None:
            self._group_guard(self._options.connection, group, found)
        return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in found}

    def _list_offsets(
        self, specs: Mapping[PartitionKey, OffsetSpec], isolation: IsolationLevel | None = None
    ) -> dict[PartitionKey, int]:
        if not specs:
            return {}

        def request() -> dict[PartitionKey, int]:
            futures = self._admin.list_offsets(
                {KafkaTopicPartition(t, p): spec for (t, p), spec in specs.items()},
                isolation_level=isolation or self._isolation,
                request_timeout=self._timeout_s,
            )
            listed, refused = {}, set()
            for tp, future in futures.items():
                try:
                    listed[(tp.topic, tp.partition)] = listed_offset(future.result(self._timeout_s).offset)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
                        raise
                    refused.add(tp.topic)  # its ACLs removed since the metadata named it
            if refused:
                raise topic_authorization_error(self._options, sorted(refused), "TOPIC_AUTHORIZATION_FAILED on ListOffsets")
            return listed

        return self._retrying("list offsets", request)

    def _retrying(self, what: str, call: Callable[[], T]) -> T:
        """``call``, retried on retriable errors up to fetchOffset.numRetries times, all within
        one request timeout, so an unreachable cluster fails after kafka.socket.timeout.ms."""
        tries = 0

        def attempt(_: Deadline) -> T:
            nonlocal tries
            tries += 1
            try:
                try:
                    return call()
                except TimeoutError:  # a future's result() that waited in vain: as librdkafka's own timeout
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "no answer before the request timeout")) from None
            except KafkaException as exc:
                if LOOKUP_RETRIABLE(exc):
                    self._authentication.check(self._admin)  # refused credentials look like an unreachable cluster
                raise

        try:
            # UNKNOWN_TOPIC_OR_PART is asked again too: a broker that has not yet learnt of a new topic says so.
            return retry(attempt, Deadline(self._timeout_s), lambda exc: LOOKUP_RETRIABLE(exc) or _VANISHED(exc),
                         Backoff(self._options.fetch_offset_retry_interval_ms / 1000.0),
                         attempts=self._options.fetch_offset_retries + 1,
                         on_retry=lambda exc, _: log.info("Retrying %s after %s", what, exc.args[0].str()))
        except KafkaException as exc:
            if _VANISHED(exc):
                # Not data loss yet, whatever failOnDataLoss says: the reader plans again from a new listing.
                raise PartitionsVanished(
                    f"A topic or partition vanished while planning ({what}; {tries} attempt(s)): {exc.args[0].str()}."
                ) from None
            if not LOOKUP_RETRIABLE(exc):
                raise
            raise KafkaEosUnavailableError(
                f"Kafka at {self._options.bootstrap_servers} (kafka.bootstrap.servers) did not answer "
                f"'{what}' within {self._timeout_s:g}s ({tries} attempt(s)): {exc.args[0].str()}. "
                "Check the address, and that the broker is reachable from the Spark driver and "
                "executors; kafka.socket.timeout.ms sets the timeout, fetchOffset.numRetries the retries."
            ).with_code(exc.args[0].code()) from None
