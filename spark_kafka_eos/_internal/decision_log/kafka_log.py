"""The decision log: a compacted topic, key = transactional id prefix, value = JSON record.

A ``decision`` record, written in the coordinator's own transaction (``<prefix>-coordinator``), is
the commit point of an epoch: once it is committed, every participant it names is committed
eventually (phase 2, or roll-forward by recovery), never aborted. A ``complete`` record follows
when phase 2 is done; from then on the participants' transactional ids may be reused and their
state says nothing about the decided epoch. A ``reset`` record (from the CLI) forgets a prefix.

Writing through ``<prefix>-coordinator`` fences a zombie driver: ``init_transactions`` bumps the
coordinator's epoch, so an older driver's decision can no longer commit.

This module is the log's transport. A record larger than Kafka's default record size is written in
chunks (:mod:`spark_kafka_eos._internal.decision_log.envelope`). Every append also commits, in the same
transaction, an offset of the prefix's *index group* (``<prefix>.kafka-eos-log-index``, a consumer
group that never has members) pointing just past the record: so finding a prefix's last record is
one OffsetFetch and one read at a known offset, whatever the log holds for other prefixes. The
index offset becomes visible only when the transaction commits, so the record it points at is
committed and is read without waiting for the partition's last stable offset, which a crashed
coordinator of another prefix may hold back. A prefix without an index entry (its first record, a
log written by an earlier version, index offsets expired after the broker's
``offsets.retention.minutes``) is found by scanning the log, as before.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import ConfigEntry, ConfigResource, NewTopic, OffsetSpec, ResourceType

from spark_kafka_eos._internal.bounded_cache import BoundedCache
from spark_kafka_eos._internal.cluster import (
    admin_client,
    cached_session,
    cluster_metadata,
    forget_topic,
    group_offset_reader,
    known_topic,
    point_reader,
    remember_topic,
    renew_admin_client,
)
from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.config.reader import Subscription, internal_read_options
from spark_kafka_eos._internal.config.writer import WriterOptions
from spark_kafka_eos._internal.decision_log.coordinator_id import COORDINATOR_TRANSACTION_TIMEOUT_MS, coordinator_transactional_id
from spark_kafka_eos._internal.decision_log.envelope import (
    Manifest,
    announcement_key,
    archive_key,
    chunk_key,
    digest,
    head_key,
    is_chunk_of,
    is_derived_key,
    join,
    parse_head,
    split,
)
from spark_kafka_eos._internal.decision_log.group_marker import GroupMarker
from spark_kafka_eos._internal.decision_log.index_group import index_entry, index_error, index_group
from spark_kafka_eos._internal.decision_log.records import (
    HISTORY_LIMIT,
    Aborting,
    ArchiveRef,
    HistoryEntry,
    LogRecord,
    announcement_from_json,
    announcement_to_json,
    archive_overflow,
)
from spark_kafka_eos._internal.read.partition_reader import read_offset_range
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos._internal.retry import (
    JUST_CREATED,
    LEADER_MOVING,
    OPERATION_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    UNANSWERED,
    Backoff,
    Deadline,
    listed_offset,
    retry_kafka,
    wait_until,
)
from spark_kafka_eos._internal.txn.bounded_call import AbandonedCallError, bounded
from spark_kafka_eos._internal.txn.session import PreparedTxnState, TxnDescription, TxnSessionError, TxnState
from spark_kafka_eos._internal.txn.transactional_producer import start_transactional_producer
from spark_kafka_eos.errors import KafkaEosAuthorizationError, KafkaEosDecisionLogError

log = logging.getLogger(__name__)

ARCHIVE_FORMAT = "kafka-eos-history-archive-1"
_LOG_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "min.compaction.lag.ms": "0",
    "segment.ms": "3600000",
    "min.cleanable.dirty.ratio": "0.1",
}


def _log_topic_config(replication: int) -> dict[str, str]:
    """The log topic's settings; replicated, it also wants two in-sync replicas for every decision
    (with acks=all, a decision then survives the loss of any one broker)."""
    return {**_LOG_TOPIC_CONFIG, **({"min.insync.replicas": "2"} if replication >= 2 else {})}


_NOT_READY = LEADER_MOVING | JUST_CREATED | UNANSWERED
_NOT_AUTHORIZED = {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED}
_COMMIT_PROBE_S = 2.0
"""How long a commit waits for its answer before the coordinator is asked whether it committed."""
_COMMIT_ATTEMPTS = 5


class RecordNotCommittedError(KafkaEosDecisionLogError):
    """Writing a record failed before its transaction's commit was sent: it is certainly not in the log
    (unlike a failed commit, whose outcome is unknown until the log is read back)."""


class KafkaDecisionLog:
    """The decision log on its compacted Kafka topic (:class:`~spark_kafka_eos._internal.decision_log.protocol.DecisionLog`)."""

    def __init__(self, options: WriterOptions, settle_timeout_s: float = 2 * COORDINATOR_TRANSACTION_TIMEOUT_MS / 1000) -> None:
        self._options = options
        self._topic = options.decision_log_topic
        self._connection = options.connection
        self._admin = admin_client(options.connection)
        self._settle_timeout_s = settle_timeout_s
        self._producer: Producer | None = None
        self._holder: PreparedTxnState | None = None
        self._fenced_as: PreparedTxnState | None = None
        """The identity this log's last fence took: a producer that replaces it may only be its successor."""
        self._id_committed = True
        """Whether the coordinator id's last transaction committed, as far as this log knows: not after its fence
        (InitProducerId leaves the id Empty), nor while a transaction is open or after one failed."""
        self._last_seen: dict[str, LogRecord] = {}
        """The last record of each prefix read after this log's fence, or written since: what the mark may append."""
        self._scans: dict[str, _Scan] = {}
        """Where this log's last scan for each prefix ended, what it found, and the record it read last."""

    # -- topic ----------------------------------------------------------------------------
    def ensure_topic(self) -> None:
        """Create the compacted log topic when it is missing; a clear error if that is forbidden,
        or if an existing topic has more than one partition or a cleanup policy other than compact."""
        if known_topic(self._options.connection, self._topic):
            return
        metadata = cluster_metadata(self._connection, timeout_s=REQUEST_TIMEOUT_S)
        if self._topic not in metadata.topics:
            self._create_topic(min(3, len(metadata.brokers)))
            return
        partitions = len(metadata.topics[self._topic].partitions)
        if partitions != 1:
            raise KafkaEosDecisionLogError(
                f"The decision log topic '{self._topic}' (option decisionLogTopic) has {partitions} partitions; "
                "it must have exactly 1 (every decision of a prefix is read from partition 0). Fix: name another "
                f"topic with decisionLogTopic, or recreate it with 1 partition and cleanup.policy=compact."
            )
        self._check_cleanup_policy()
        remember_topic(self._options.connection, self._topic)

    def _create_topic(self, replication: int) -> None:
        futures = self._admin.create_topics(
            [NewTopic(self._topic, 1, replication, config=_log_topic_config(replication))], operation_timeout=REQUEST_TIMEOUT_S
        )
        try:
            futures[self._topic].result(2 * REQUEST_TIMEOUT_S)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                self._check_cleanup_policy()  # created by someone else a moment ago
                return
            settings = " ".join(f"--config {k}={v}" for k, v in _log_topic_config(replication).items())
            raise KafkaEosDecisionLogError(
                f"The decision log topic '{self._topic}' (option decisionLogTopic) does not exist and could not be "
                f"created: {error.str()}. Fix: have an administrator create it: kafka-topics --create --topic "
                f"{self._topic} --partitions 1 --replication-factor {replication} {settings}"
            ) from None

    def _check_cleanup_policy(self) -> None:
        """Only ``compact`` keeps every prefix's last record for ever: ``delete`` (or ``compact,delete``)
        drops decisions after retention.ms, and with them what recovery and replays rely on."""
        resource = ConfigResource(ResourceType.TOPIC, self._topic)

        def describe() -> dict[str, ConfigEntry]:
            # Just created (by us or another driver): the answering broker learns of it a moment later.
            return retry_kafka(
                lambda _: self._admin.describe_configs([resource], request_timeout=REQUEST_TIMEOUT_S)[resource].result(2 * REQUEST_TIMEOUT_S),
                REQUEST_TIMEOUT_S, {KafkaError.UNKNOWN_TOPIC_OR_PART})

        try:
            try:
                entries = describe()
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._TIMED_OUT:
                    raise
                self._admin = renew_admin_client(self._connection)  # its controller may be a broker that just died
                entries = describe()
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.code() not in _NOT_AUTHORIZED:
                raise
            log.warning("Cannot check the configuration of the decision log topic %s (%s): make sure its "
                        "cleanup.policy is compact", self._topic, error.str())
            return
        policy = entries["cleanup.policy"].value or ""
        if [p.strip() for p in policy.split(",")] == ["compact"]:
            return
        retention = entries["retention.ms"].value if "retention.ms" in entries else "?"
        raise KafkaEosDecisionLogError(
            f"The decision log topic '{self._topic}' (option decisionLogTopic) has cleanup.policy={policy}; it must be "
            f"exactly 'compact'. With a delete policy Kafka removes records older than retention.ms ({retention} ms), "
            "and with them the last decision of every prefix that has not committed since: recovery could no longer "
            "roll a decided epoch forward, and a replayed micro-batch would be written again. Fix: kafka-configs "
            f"--bootstrap-server {self._options.bootstrap_servers} --alter --entity-type topics --entity-name "
            f"{self._topic} --add-config cleanup.policy=compact (or name another topic with decisionLogTopic)."
        )

    # -- reading --------------------------------------------------------------------------
    def last(self, prefix: str, scan_unindexed: bool = True) -> LogRecord | None:
        """The last committed record of ``prefix``, or None. ``scan_unindexed=False``: None, without scanning the log,
        where the prefix has no index entry (its first job, or an entry Kafka let expire after days idle). Every decision
        commits the entry in its own transaction: for the question a task asks once it prepared, where a missed decision
        costs only a duplicate the driver aborts (see ``task_producer.epoch_already_decided``)."""
        entry = index_entry(self._connection, self._topic, prefix, self._settle_timeout_s)
        if entry is None and not scan_unindexed:
            self.ensure_topic()  # a log that is not fit to be one is refused here as well
            return None
        known = _KNOWN_HEADS.get((self._connection, self._topic, prefix))
        if known is not None and entry is not None and known[0] == entry:
            self._last_seen[prefix] = known[1]
            return known[1]
        head = self._indexed_head(prefix, entry)
        if head is None:
            # No index entry: a prefix's first record, or a log deleted or re-created since this process
            # last looked at it (its index offsets went with it). Look at the topic again before scanning.
            forget_topic(self._connection, self._topic)
            self.ensure_topic()
            head = self._scanned_head(prefix)
        if head is None:
            return None
        value = parse_head(head)
        if isinstance(value, Manifest):
            value = join(prefix, value, _read_at(self._connection, self._topic, value.chunk_offsets))
        record = LogRecord.from_json(value)
        if entry is not None:
            _KNOWN_HEADS.put((self._connection, self._topic, prefix), (entry, record))
        self._last_seen[prefix] = record
        return record

    def records_since(self, since: int = 0) -> tuple[list[LogRecord], int]:
        """Every committed record of every prefix from offset ``since`` on, in log order, read_committed up to the
        log's last stable offset, and that offset (where a next call may start). One scan of the log: the operator
        tools' view of every prefix, which no index gives. Compaction keeps only each prefix's last record."""
        tp = KafkaTopicPartition(self._topic, 0)
        end = self._offset(tp, IsolationLevel.READ_COMMITTED)
        records = []
        if end > since:
            for batch in self._read(since, end, "read_committed"):
                for key, value in zip(batch.column("key").to_pylist(), batch.column("value").to_pylist()):
                    if key is None or value is None or is_derived_key(key):
                        continue
                    head = parse_head(value)
                    if isinstance(head, Manifest):
                        head = join(key.decode(errors="replace"), head, _read_at(self._connection, self._topic, head.chunk_offsets))
                    records.append(LogRecord.from_json(head))
        return records, end

    def _indexed_head(self, prefix: str, entry: tuple[int, str] | None) -> bytes | None:
        """The head record the index entry points at; None without an (up-to-date) index entry."""
        if entry is None:
            return None
        offset, expected = entry
        key, value = _read_at(self._connection, self._topic, [offset]).get(offset, (None, None))
        if key != head_key(prefix) or value is None or digest(value) != expected:
            # E.g. the log topic was re-created: the index is stale, the log itself says what is last.
            log.warning("The decision log index of prefix %s points at offset %d of %s, which does not hold the "
                        "indexed record: scanning the log instead", prefix, offset, self._topic)
            return None
        return value

    def _scanned_head(self, prefix: str) -> bytes | None:
        """The last committed head record of ``prefix``, by a read_committed scan of the log. A second scan of this
        log (one operation: before its fence, then after) goes on from where the first ended, if the head it found
        and the record it read last are still at their offsets: below the last stable offset nothing changes but
        compaction, which keeps a key's last record; a log re-created, or truncated by deleting records, is
        scanned whole."""
        end = self._stable_end(prefix)
        before = self._scans.get(prefix)
        start: int = 0
        found: tuple[int, str] | None = None
        value: bytes | None = None
        last_read: tuple[int, str] | None = None
        announcement: bytes | None = None
        if before is not None and before.end <= end and self._still_there([r for r in (before.found, before.last_read) if r]):
            start, found, value, last_read, announcement = before.end, before.found, before.value, before.last_read, before.announcement
        announced = announcement_key(prefix)
        for batch in self._read(start, end, "read_committed"):
            keys, values, offsets = (batch.column(name).to_pylist() for name in ("key", "value", "offset"))
            for key, record_value, offset in zip(keys, values, offsets):
                if key == head_key(prefix):
                    found, value = (offset, _record_digest(key, record_value)), record_value
                elif key == announced:
                    announcement = record_value
            if batch.num_rows:
                last_read = (offsets[-1], _record_digest(keys[-1], values[-1]))
        self._scans[prefix] = _Scan(end, found, value, last_read, announcement)
        return value

    def _still_there(self, records: Sequence[tuple[int, str]]) -> bool:
        """Whether the log still holds each of ``records`` ((offset, digest of its key and value)) as it was."""
        held = _read_at(self._connection, self._topic, [offset for offset, _ in records]) if records else {}
        return all(offset in held and _record_digest(*held[offset]) == expected for offset, expected in records)

    def _stable_end(self, prefix: str) -> int:
        """An end for the scan: the last stable offset, once no record of ``prefix`` lies above it.
        Records of other prefixes' open (or crashed) transactions are not waited for."""
        tp = KafkaTopicPartition(self._topic, 0)
        stable = written = -1

        def settled() -> bool:
            nonlocal stable, written
            stable = self._offset(tp, IsolationLevel.READ_COMMITTED)
            written = self._offset(tp, IsolationLevel.READ_UNCOMMITTED)
            return stable == written or not self._has_records_of(prefix, stable, written)

        if not wait_until(settled, Deadline(self._settle_timeout_s), Backoff(0.02)):
            raise KafkaEosDecisionLogError(
                f"The decision log '{self._topic}' has had an open transaction for {self._settle_timeout_s:g}s "
                f"(last stable offset {stable}, high watermark {written}) and prefix {prefix} has records above it "
                "whose outcome is not known yet. The broker aborts a crashed coordinator's transaction after its "
                "transaction timeout; retry then."
            )
        return stable

    def _has_records_of(self, prefix: str, start: int, end: int) -> bool:
        for batch in self._read(start, end, "read_uncommitted"):
            if any(key in (head_key(prefix), announcement_key(prefix)) or is_chunk_of(prefix, key)
                   for key in batch.column("key").to_pylist()):
                return True
        return False

    def _read(self, start: int, end: int, isolation: str) -> Iterator[pa.RecordBatch]:
        reader_options = internal_read_options(self._connection, Subscription("assign", partitions=((self._topic, 0),)), isolation)
        return read_offset_range(reader_options, OffsetRange(self._topic, 0, start, end))

    def _offset(self, tp: KafkaTopicPartition, isolation: IsolationLevel, timeout_s: float = REQUEST_TIMEOUT_S) -> int:
        def latest(_: Deadline) -> int:
            futures = self._admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=isolation, request_timeout=timeout_s)
            try:
                # librdkafka times the request out itself: a request abandoned while pending, or timed out early, can
                # abort the process later (librdkafka issues #4605, #3663).
                return listed_offset(int(futures[tp].result(timeout_s + 5).offset))
            except concurrent.futures.TimeoutError:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"no answer within {timeout_s:g}s")) from None

        # A log topic created a moment ago has no leader (epoch) everywhere yet; a partition whose leader just died
        # answers without an offset until it has a new one.
        return retry_kafka(latest, 2 * timeout_s, _NOT_READY)

    # -- writing --------------------------------------------------------------------------
    def append(self, record: LogRecord, group_offsets: Mapping[tuple[str, int], int] | None = None,
               before_commit: Callable[[], None] | None = None, commit_by: float | None = None) -> None:
        """Commit ``record``, its index entry (and the consumer group's offsets, when given) in the
        coordinator's transaction. Returns only once it is committed; raises if it is not.
        ``before_commit`` runs once everything is written, before the commit: if it raises, the
        transaction is aborted. ``commit_by`` (``time.monotonic()``) bounds the commit's retries."""
        with self._transaction_of(record.prefix) as producer:
            producer.begin_transaction()
            self._id_committed = False
            written = False
            try:
                offset, value = self._produce(producer, record)
                index = KafkaTopicPartition(self._topic, 0, offset + 1, metadata=digest(value))
                group = index_group(record.prefix)
                try:
                    self._send_offsets(group, {(self._topic, 0): offset + 1}, index.metadata or "")
                except TxnSessionError as exc:
                    if exc.error == "GROUP_AUTHORIZATION_FAILED":
                        raise index_error(group, KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)) from None
                    raise
                if group_offsets and record.consumer_group:
                    marker = GroupMarker(self._topic, record.prefix, record.epoch_id).to_metadata()
                    self._send_offsets(record.consumer_group, group_offsets, marker)
                written = True
                if before_commit is not None:
                    before_commit()
            except Exception as err:
                _abort_quietly(producer)
                if written:
                    raise  # before_commit's own refusal
                raise RecordNotCommittedError(str(err)) from err
            self._commit_or_forget(producer, record.prefix, commit_by)
            self._id_committed = True
            self._last_seen[record.prefix] = record
            _KNOWN_HEADS.put((self._connection, self._topic, record.prefix), ((offset, index.metadata or ""), record))

    def _send_offsets(self, group: str, offsets: Mapping[tuple[str, int], int], metadata: str) -> None:
        """Commit ``offsets`` of ``group`` in this log's open transaction, by the transaction session's own requests
        (AddOffsetsToTxn, then TxnOffsetCommit), each bounded and retried through coordinator moves and reconnects.
        Not librdkafka's ``send_offsets_to_transaction``: it waits for the group coordinator with no bound (see
        :mod:`~spark_kafka_eos._internal.txn.bounded_call`). The transaction's records were delivered first, under
        this producer's id and epoch, so the identity described after its fence (``_fenced_as``) is this producer's
        own: a fence by another driver before that description would have failed their delivery."""
        identity = self._fenced_as
        assert identity is not None, "offsets are sent only in a transaction of this log's producer"
        session = cached_session(self._connection)
        session.add_offsets_to_txn(identity, group)
        # As librdkafka writes it: NUL-terminated (confluent-kafka reads a committed offset's metadata as a C string).
        session.txn_offset_commit(identity, group, offsets, metadata + "\0")

    def archive(self, prefix: str, history: tuple[HistoryEntry, ...],
                archives: tuple[ArchiveRef, ...]) -> tuple[tuple[HistoryEntry, ...], tuple[ArchiveRef, ...]]:
        """(history, archives) for a new record of ``prefix``: once the history outgrows its limit, its oldest runs
        are committed to an archive record of their own (a key of its own, so compaction keeps it) and dropped
        from the history. An archive whose record never follows is superseded by the next one of that index."""
        overflow = archive_overflow(history)
        if overflow is None:
            return history, archives
        old, kept = overflow
        value = json.dumps({"format": ARCHIVE_FORMAT, "prefix": prefix, "history": old}, separators=(",", ":")).encode()
        with self._transaction_of(prefix) as producer:
            producer.begin_transaction()
            self._id_committed = False
            try:
                [offset] = self._produce_flushed(producer, [(archive_key(prefix, len(archives)), value)])
            except Exception:
                _abort_quietly(producer)
                raise
            self._commit_or_forget(producer, prefix)
        self._id_committed = True
        return kept, (*archives, (offset, digest(value)))

    def archived_runs(self, record: LogRecord) -> tuple[HistoryEntry, ...]:
        """The runs in ``record``'s archives, oldest first. An archive that is gone (the log re-created, or a
        record edited by hand) is an error: a run it held could no longer be recognised."""
        missing = [offset for offset, expected in record.archives
                   if (_ARCHIVES.get((self._connection, self._topic, offset)) or ("",))[0] != expected]
        found = _read_at(self._connection, self._topic, missing) if missing else {}
        runs: list[HistoryEntry] = []
        for offset, expected in record.archives:
            cached = _ARCHIVES.get((self._connection, self._topic, offset))
            if cached is None or cached[0] != expected:
                _, value = found.get(offset, (None, None))
                if value is None or digest(value) != expected:
                    raise KafkaEosDecisionLogError(
                        f"The archive of prefix {record.prefix}'s oldest runs at offset {offset} of the decision log "
                        f"'{self._topic}' is gone or changed: a re-run of a writeId older than its last {HISTORY_LIMIT} "
                        "runs could not be recognised, and would be written again. Nothing was written. Fix: restore "
                        "the log; or, if those runs will never be re-run, `kafka-eos reset` the prefix."
                    )
                cached = (expected, tuple((str(e), int(t)) for e, t in json.loads(value)["history"]))
                _ARCHIVES.put((self._connection, self._topic, offset), cached)
            runs += cached[1]
        return tuple(runs)

    def prove_owner(self, prefix: str, aborting: Sequence[Aborting] = ()) -> None:
        """Prove, on a prefix with no record, that no other driver has fenced this one. With ``aborting``: commit
        the announcement of those transactions under the prefix's announcement key (not its head: the prefix still
        has no record), which a driver that fences after it reads. Without: a coordinator transaction that registers
        an offset of the index group (the coordinator checks the producer epoch) and is then aborted, so that it
        leaves nothing behind, not even a committed transaction (which would read as a prefix with history)."""
        if aborting:
            self._announce(prefix, aborting)
            return
        with self._transaction_of(prefix) as producer:
            producer.begin_transaction()
            group = index_group(prefix)
            try:
                metadata = group_offset_reader(self._connection, group).consumer_group_metadata()
                bounded(lambda: producer.send_offsets_to_transaction([KafkaTopicPartition(self._topic, 0, 0)], metadata, REQUEST_TIMEOUT_S),
                        REQUEST_TIMEOUT_S, "send_offsets_to_transaction")
            except AbandonedCallError:
                self._producer = None
                raise
            except KafkaException as exc:
                _abort_quietly(producer)
                raise KafkaEosDecisionLogError(f"This driver no longer owns prefix {prefix}: {exc.args[0].str()}") from None
            self._end_transaction(producer, committed=False)

    def _announce(self, prefix: str, aborting: Sequence[Aborting]) -> None:
        with self._transaction_of(prefix) as producer:
            producer.begin_transaction()
            self._id_committed = False
            try:
                self._produce_flushed(producer, [(announcement_key(prefix), announcement_to_json(prefix, aborting))])
            except Exception as err:
                _abort_quietly(producer)
                raise KafkaEosDecisionLogError(f"This driver no longer owns prefix {prefix}: {err}") from err
            self._commit_or_forget(producer, prefix)

    def sweep_announcement(self, prefix: str) -> tuple[Aborting, ...]:
        scan = self._scans.get(prefix)
        return () if scan is None or scan.found is not None or scan.announcement is None \
            else announcement_from_json(scan.announcement)

    def _produce(self, producer: Producer, record: LogRecord) -> tuple[int, bytes]:
        """Write ``record`` (its chunks first when it is large); returns the head record's offset and value."""
        value = record.to_json()
        chunks = split(value)
        if chunks is not None:
            keys = [chunk_key(record.prefix, i) for i in range(len(chunks.chunks))]
            value = chunks.manifest(self._produce_flushed(producer, list(zip(keys, chunks.chunks)))).to_json()
        [offset] = self._produce_flushed(producer, [(head_key(record.prefix), value)])
        return offset, value

    def _produce_flushed(self, producer: Producer, records: Sequence[tuple[bytes, bytes]]) -> list[int]:
        """Produce and flush ``records``; their offsets, from the delivery reports."""
        offsets: dict[int, int] = {}
        errors: list[str] = []

        def report(index: int) -> Callable[[KafkaError | None, Message], None]:
            def delivered(error: KafkaError | None, message: Message) -> None:
                offset = message.offset()
                if error is None and offset is not None:
                    offsets[index] = offset
                else:
                    errors.append(error.str() if error is not None else "delivered without an offset")
            return delivered

        for index, (key, value) in enumerate(records):
            producer.produce(self._topic, value=value, key=key, partition=0, on_delivery=report(index))
        producer.flush(REQUEST_TIMEOUT_S)
        if errors or len(offsets) < len(records):
            problem = errors[0] if errors else f"not delivered within {REQUEST_TIMEOUT_S:g}s"
            raise KafkaEosDecisionLogError(f"Writing to the decision log '{self._topic}' failed: {problem}")
        return [offsets[i] for i in range(len(records))]

    def fence(self, prefix: str) -> None:
        """Hold the coordinator's transactional id from now on: any other (zombie) driver of the prefix can
        no longer commit a decision."""
        self._coordinator_producer(prefix)

    def fenced_last(self, prefix: str, anew: bool = False) -> LogRecord | None:
        """Fence (:meth:`fence`), then the prefix's last record. A fence that initialised the id on a prefix with
        history commits that record again at once (:meth:`keep_history_mark`): a driver that dies later in its
        operation then leaves the id committed, not Empty. ``anew``: fence this log's own producer too, with a new
        one, so that a commit of it whose outcome is unknown can no longer land."""
        if anew:
            self._producer = self._holder = self._fenced_as = None
            self._last_seen.pop(prefix, None)
        self._coordinator_producer(prefix, reuse=not anew)
        last = self.last(prefix)
        self.keep_history_mark(prefix)
        return last

    def keep_history_mark(self, prefix: str) -> None:
        """After an operation whose fence initialised the coordinator id and that committed nothing since:
        re-append the prefix's last record. ``init_transactions`` leaves the id Empty, which reads like a
        coordinator that never committed; the id's committed state is what tells a lost decision log from a
        prefix without history (:meth:`~spark_kafka_eos._internal.write.coordinator.TwoPhaseCommitCoordinator`), so
        every operation on a prefix with history leaves it committed. Also refreshes the index group's
        offset, so that it expires only ``offsets.retention.minutes`` after the prefix's last operation."""
        last = self._last_seen.get(prefix)
        if self._id_committed or last is None:
            return
        self.append(last)

    @contextmanager
    def _transaction_of(self, prefix: str) -> Iterator[Producer]:
        """The coordinator's producer, for one transaction; should anything in it fail, it is not reused."""
        producer = self._coordinator_producer(prefix)
        try:
            yield producer
        except BaseException:
            self._holder = None
            raise

    def keep_for_reuse(self) -> None:
        """Hand the coordinator's producer to this process's next commit of the prefix (call it once the
        operation succeeded, with no transaction of the producer open). That commit uses it only if it still
        holds the id, which spares it initialising the id again (~20 ms)."""
        if self._producer is not None and self._holder is not None:
            _IDLE_COORDINATORS.put((self._connection, self._topic, self._holder.transactional_id), (self._producer, self._holder))
        self._producer = None

    def _coordinator_producer(self, prefix: str, reuse: bool = True) -> Producer:
        """The coordinator's transactional producer, once per log instance (one commit or recovery): one this
        process kept that still holds the id (DescribeTransactions shows its producer id and epoch, with no
        transaction open: nobody initialised the id since), else a new one, whose ``init_transactions`` fences
        any other driver of the prefix."""
        if self._producer is None:
            txn_id = coordinator_transactional_id(prefix)
            key = (self._connection, self._topic, txn_id)
            session = cached_session(self._connection)
            kept = _IDLE_COORDINATORS.take(key) if reuse else None
            if kept is not None and _still_holds(session.describe([txn_id])[txn_id], kept[1]):
                self._producer, self._holder = kept
                self._fenced_as = kept[1]
                return kept[0]
            try:
                producer = start_transactional_producer(_coordinator_config(self._options, txn_id), self._topic, REQUEST_TIMEOUT_S)
            except KafkaException as exc:
                if exc.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                    raise transactional_id_refused(self._connection, prefix) from None
                raise
            self._producer = producer
            self._id_committed = False
            self._last_seen.pop(prefix, None)  # only a record read after this fence may be re-appended by the mark
            # Described right after the fence; should another driver fence this one in between, the identity is
            # that driver's, and this producer's next transaction fails (fenced) like any fenced driver's.
            self._holder = session.describe([txn_id])[txn_id].prepared_state()
            try:
                self._refuse_unless_successor(prefix, self._fenced_as, self._holder)
            except KafkaEosDecisionLogError:
                self._producer = self._holder = None  # never used: a retry of the operation's step refuses again
                raise
            self._fenced_as = self._holder
        return self._producer

    @staticmethod
    def _refuse_unless_successor(prefix: str, before: PreparedTxnState | None, now: PreparedTxnState) -> None:
        """A producer that replaces this operation's own (its commit's answer was lost) must take the id's next
        epoch: any other means another driver initialised the id in between, and what this operation read before
        (a last record it would append again, say) may be stale. Only :meth:`fenced_last` with ``anew`` fences
        afresh, and reads the log again."""
        if before is None or (now.producer_id, now.producer_epoch) == (before.producer_id, before.producer_epoch + 1):
            return
        raise KafkaEosDecisionLogError(
            f"This driver no longer owns prefix {prefix}: another driver initialised its coordinator id after this "
            "operation fenced it, so this operation stops before writing what it read earlier")

    def _commit_or_forget(self, producer: Producer, prefix: str, commit_by: float | None = None) -> None:
        """:meth:`_commit`; when it fails, the prefix's last record is not known any more (the commit may yet have
        landed): the mark may not append the one read before, which could overwrite a committed decision."""
        try:
            self._commit(producer, prefix, commit_by)
        except BaseException:
            self._last_seen.pop(prefix, None)
            raise

    def _commit(self, producer: Producer, prefix: str, commit_by: float | None = None) -> None:
        """Commit the transaction of ``producer`` (its records delivered), until ``commit_by`` (``time.monotonic()``;
        without it, a few requests' time). A commit whose answer is slow or lost is not waited out: after each
        short wait the coordinator is asked (on another connection) whether it committed or aborted the
        transaction, so that phase 2 can start while its participants are still open. An error here leaves the
        outcome unknown: the caller reads it back from the log rather than guessing."""
        end = time.monotonic() + _COMMIT_ATTEMPTS * REQUEST_TIMEOUT_S if commit_by is None else commit_by
        failures = 0
        while True:
            try:
                self._end_transaction(producer, committed=True, timeout_s=max(min(_COMMIT_PROBE_S, end - time.monotonic()), 0.1))
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                lost = isinstance(exc, AbandonedCallError)
            outcome = self._outcome_at_coordinator(prefix)
            if outcome is True and not lost and self._answered(producer):
                return
            if outcome is not None or lost:
                # This producer still waits for its answer (librdkafka allows no other transaction until then):
                # the next transaction of this log uses a new one.
                self._producer = self._holder = None
                if outcome:
                    log.warning("Committing to the decision log reported %s, but its coordinator committed the "
                                "transaction: going on", error.str())
                    return
                if outcome is False:
                    raise RecordNotCommittedError(f"the coordinator aborted the transaction ({error.str()})")
                raise KafkaEosDecisionLogError(f"The decision could not be committed: {error.str()}")
            failures += error.code() != KafkaError._TIMED_OUT
            if error.retriable() and failures < _COMMIT_ATTEMPTS and time.monotonic() < end:
                continue
            if error.txn_requires_abort():
                _abort_quietly(producer)
            raise KafkaEosDecisionLogError(f"The decision could not be committed: {error.str()}") from None

    def _answered(self, producer: Producer) -> bool:
        """Whether a commit the coordinator made is answered within a little longer (the answer was only
        slow): then ``producer`` can be kept for the next transaction."""
        try:
            self._end_transaction(producer, committed=True, timeout_s=_COMMIT_PROBE_S)
        except KafkaException:
            return False
        return True

    def _end_transaction(self, producer: Producer, committed: bool, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        """``commit_transaction`` or ``abort_transaction`` of ``producer``, bounded: one that does not return is
        given up on (:class:`AbandonedCallError`), and so is the producer."""
        end = producer.commit_transaction if committed else producer.abort_transaction
        try:
            bounded(lambda: end(timeout_s), timeout_s, end.__name__)
        except AbandonedCallError:
            if producer is self._producer:
                self._producer = self._holder = None
            raise

    def _outcome_at_coordinator(self, prefix: str) -> bool | None:
        """Whether the coordinator committed (True) or aborted (False) this log's open transaction, whose
        records were delivered (so the coordinator's state is this transaction's until a later one of the same
        producer id and epoch, which this log has not begun); None while it is open, or when the id's state is
        another producer's or epoch's (a fence, a timeout), or cannot be read."""
        if self._holder is None:
            return None
        txn_id = coordinator_transactional_id(prefix)
        try:
            described = cached_session(self._connection).describe([txn_id])[txn_id]
        except Exception:  # noqa: BLE001 - the same question is settled later by reading the log back
            return None
        if described.prepared_state() != self._holder:
            return None
        if described.state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT):
            return True
        if described.state in (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT):
            return False
        return None


_DELIVERY_TIMEOUTS = ("delivery.timeout.ms", "message.timeout.ms")


_Key = tuple[KafkaConnection, str, str]
"""(connection, log topic, prefix or coordinator id)."""
_KNOWN_HEADS: BoundedCache[_Key, tuple[tuple[int, str], LogRecord]] = BoundedCache(64)
"""The last record of each prefix this process wrote or read, with the index entry (offset, digest) that
pointed at it: while the index group still points there, ``last()`` needs no read of the log. The index
entry is the authority; this only saves reading what it names again."""
_ARCHIVES: BoundedCache[tuple[KafkaConnection, str, int], tuple[str, tuple[HistoryEntry, ...]]] = BoundedCache(64)
"""Archives of prefixes' histories read by this process, by (connection, log topic, offset): (digest, runs)."""
_IDLE_COORDINATORS: BoundedCache[_Key, tuple[Producer, PreparedTxnState]] = BoundedCache(8)
"""Coordinator producers this process finished with, and the producer id and epoch each holds (at most 8
prefixes: a worker that served more drops the longest unused). Each is taken by one operation at a time and
given back only after it succeeded: an operation that failed, or a second driver of the prefix in this
process while one is at work, initialises the id anew."""


def _still_holds(described: TxnDescription, holder: PreparedTxnState) -> bool:
    return described.prepared_state() == holder and described.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT, TxnState.EMPTY)


def _coordinator_config(options: WriterOptions, transactional_id: str) -> dict[str, object]:
    """The coordinator producer's configuration: the tasks' settings, with a delivery timeout no longer
    than its short transaction (librdkafka refuses a longer one; the tasks keep the user's), and without
    statistics: librdkafka queues them every interval whether or not anyone polls, and this producer waits
    unpolled between commits (at the tasks' 5 ms, 2 MB a second)."""
    config = options.producer_config(transactional_id, COORDINATOR_TRANSACTION_TIMEOUT_MS)
    config["statistics.interval.ms"] = 0
    for name in _DELIVERY_TIMEOUTS:
        if name in config and int(str(config[name])) > COORDINATOR_TRANSACTION_TIMEOUT_MS:
            config[name] = COORDINATOR_TRANSACTION_TIMEOUT_MS
    return config


def transactional_id_refused(connection: KafkaConnection, prefix: str) -> KafkaEosAuthorizationError:
    username = connection.client_config().get("sasl.username")
    principal = f"User:{username}" if username else "<the principal of these kafka.* credentials>"
    return KafkaEosAuthorizationError(
        f"Kafka at {connection.bootstrap_servers} refused {principal} the TransactionalId '{coordinator_transactional_id(prefix)}' "
        "(TRANSACTIONAL_ID_AUTHORIZATION_FAILED). The sink's driver and tasks use the TransactionalIds that start with "
        f"the prefix '{prefix}'. Fix: kafka-acls --bootstrap-server {connection.bootstrap_servers} --add --allow-principal "
        f"{principal} --operation Write --operation Describe --transactional-id {prefix} --resource-pattern-type prefixed"
    )


@dataclass(frozen=True)
class _Scan:
    """A scan for one prefix's head: where it ended, the head it found ((offset, digest), and its value), the
    record it read last ((offset, digest)), and the last announcement of a sweep of the prefix."""

    end: int
    found: tuple[int, str] | None
    value: bytes | None
    last_read: tuple[int, str] | None
    announcement: bytes | None = None
    """The last sweep's announcement on the prefix while it had no record."""


def _record_digest(key: bytes | None, value: bytes | None) -> str:
    return digest(len(key or b"").to_bytes(8, "big") + (key or b"") + (value or b""))


def _read_at(connection: KafkaConnection, topic: str, offsets: Sequence[int]) -> dict[int, tuple[bytes | None, bytes | None]]:
    """The records (key, value) at ``offsets`` of the log's partition, read_uncommitted: only for
    offsets known to hold committed records (so the LSO is not waited for). An offset whose record
    is gone (compacted, or past the log's end) is left out."""
    consumer, lock = point_reader(connection)
    with lock:
        found: dict[int, tuple[bytes | None, bytes | None]] = {}
        for offset in sorted(set(offsets)):
            consumer.assign([KafkaTopicPartition(topic, 0, offset)])
            message = _next_message(consumer, topic, offset)
            if message is not None and message.offset() == offset:
                found[offset] = (message.key(), message.value())
        consumer.unassign()
        return found


def _next_message(consumer: Consumer, topic: str, offset: int) -> Message | None:
    """The first record at or after ``offset``, or None when there is none (end of the partition). Bounded by the
    operation timeout, not a request's: the read waits through a broker's restart (15-30 s)."""
    deadline = time.monotonic() + OPERATION_TIMEOUT_S
    while time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is None:
            continue
        error = message.error()
        if error is None:
            return message
        if error.code() in (KafkaError._PARTITION_EOF, KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            return None
        if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
            # librdkafka looks up the coordinator of the reader's group, which it never uses (explicit offsets, no
            # commits): a principal with no Read on that group reads on, as the range reader does.
            continue
        if error.fatal() or error.code() > 0:
            raise KafkaEosDecisionLogError(f"Reading offset {offset} of the decision log '{topic}' failed: {error.str()}")
    raise KafkaEosDecisionLogError(f"Reading offset {offset} of the decision log '{topic}' made no progress for {OPERATION_TIMEOUT_S:g}s "
                                   "(no broker of the log's partition answered).")


def _abort_quietly(producer: Producer) -> None:
    try:
        bounded(lambda: producer.abort_transaction(REQUEST_TIMEOUT_S), REQUEST_TIMEOUT_S, "abort_transaction")
    except KafkaException:
        pass  # the broker aborts it after COORDINATOR_TRANSACTION_TIMEOUT_MS; a producer given up on is never reused
