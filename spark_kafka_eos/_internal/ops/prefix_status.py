"""The state of every transactional id prefix of a decision log, as ``kafka-eos list`` and ``kafka-eos exporter``
show it: the last record (owner, epoch, age, state), the prefix's open transactions (the oldest one's age against
its timeout) and, per partition its decisions and open transactions wrote to, the last stable offset against the
high watermark.

One look costs one read_committed scan of the decision log (from where the last look ended, for a caller that keeps
a :class:`PrefixCatalog`), one ListTransactions on every broker, one DescribeTransactions for the open ids, and two
ListOffsets for the sink partitions of every prefix together: so a look at 1,000 prefixes is a handful of requests,
not thousands.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from spark_kafka_eos._internal.config.reader import PartitionKey, Subscription, internal_read_options
from spark_kafka_eos._internal.config.writer import WriterOptions
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.records import LogRecord, ReplayProof
from spark_kafka_eos._internal.read.offset_lookup import KafkaOffsetLookup
from spark_kafka_eos._internal.txn.protocol import TransactionClient
from spark_kafka_eos._internal.txn.session import TxnDescription, TxnState
from spark_kafka_eos._internal.write.epoch_input import kafka_positions
from spark_kafka_eos._internal.write.transactional_id import belongs_to_prefix

PrefixState = Literal["complete", "decided-not-finished", "reset"]
PREFIX_STATES: tuple[PrefixState, ...] = get_args(PrefixState)
"""``decided-not-finished``: the last record is a decision without its completion (phase 2 may still be running,
or a driver died after deciding: the next run or ``kafka-eos recover`` rolls it forward)."""


@dataclass(frozen=True)
class OpenTransaction:
    """An open transaction of a prefix: how long it has been open, and its timeout."""

    transactional_id: str
    age_ms: int
    timeout_ms: int

    @property
    def headroom_ms(self) -> int:
        """Time left before the broker aborts it (negative: overdue)."""
        return self.timeout_ms - self.age_ms


@dataclass(frozen=True)
class PartitionOffsets:
    """A partition a prefix's decisions wrote to or read from: its last stable offset and high watermark."""

    topic: str
    partition: int
    last_stable: int
    high_watermark: int

    @property
    def lso_lag(self) -> int:
        """Records written but not yet readable by read_committed consumers (an open transaction pins them)."""
        return max(self.high_watermark - self.last_stable, 0)

    def as_json(self) -> dict[str, object]:
        return {"topic": self.topic, "partition": self.partition, "last_stable_offset": self.last_stable,
                "high_watermark": self.high_watermark, "lso_lag": self.lso_lag}


@dataclass(frozen=True)
class PrefixStatus:
    """One prefix of the decision log."""

    prefix: str
    state: PrefixState
    owner: str
    last_epoch: str
    last_written_ms: int
    age_ms: int
    consumer_group: str | None
    open_transactions: tuple[OpenTransaction, ...] = ()
    sink_partitions: tuple[PartitionOffsets, ...] = ()
    source_partitions: tuple[PartitionOffsets, ...] = ()
    """The Kafka partitions the prefix's decisions consumed (their offsets, or Spark's offset log, name them): an open
    transaction there holds the prefix's stream back."""
    replay_proof: ReplayProof | None = None
    """What proves a replay of the last epoch the same input (None: the last record names no input, a reset)."""

    @property
    def oldest_open(self) -> OpenTransaction | None:
        return max(self.open_transactions, key=lambda t: t.age_ms, default=None)

    def as_json(self) -> dict[str, object]:
        """A plain dict for ``--json``: every field, the derived figures too."""
        oldest = self.oldest_open
        return {
            "prefix": self.prefix, "state": self.state, "owner": self.owner, "last_epoch": self.last_epoch,
            "last_written_ms": self.last_written_ms, "age_ms": self.age_ms, "consumer_group": self.consumer_group,
            "replay_proof": self.replay_proof,
            "open_transactions": [{"transactional_id": t.transactional_id, "age_ms": t.age_ms, "timeout_ms": t.timeout_ms,
                                   "headroom_ms": t.headroom_ms} for t in self.open_transactions],
            "oldest_open_age_ms": None if oldest is None else oldest.age_ms,
            "oldest_open_headroom_ms": None if oldest is None else oldest.headroom_ms,
            "sink_partitions": [p.as_json() for p in self.sink_partitions],
            "source_partitions": [p.as_json() for p in self.source_partitions],
        }


@dataclass
class PrefixCatalog:
    """The last record of every prefix of one decision log, and the partitions its decisions wrote to, kept up to date
    by reading only what the log gained since the last look (a log deleted or re-created since is read again from its
    start). A complete record names no partitions and compaction keeps only a prefix's last record, so a catalog
    knows a prefix's sink partitions from the decisions it has seen, and from its open transactions."""

    options: WriterOptions
    records: dict[str, LogRecord] = field(default_factory=dict)
    partitions: dict[str, set[PartitionKey]] = field(default_factory=dict)
    sources: dict[str, set[PartitionKey]] = field(default_factory=dict)
    read_up_to: int = 0

    def refresh(self) -> PrefixCatalog:
        log = KafkaDecisionLog(self.options)
        found, end = log.records_since(self.read_up_to)
        if end < self.read_up_to:  # a new log: what was read of the old one says nothing
            self.records, self.partitions, self.sources, self.read_up_to = {}, {}, {}, 0
            found, end = log.records_since(0)
        for record in found:
            self.records[record.prefix] = record
            self.partitions.setdefault(record.prefix, set()).update(
                (topic, partition) for p in record.participants for topic, partition, _ in p.records)
            self.sources.setdefault(record.prefix, set()).update(_consumed(record))
        self.read_up_to = end
        return self


def prefix_statuses(options: WriterOptions, session: TransactionClient, catalog: PrefixCatalog,
                    now_ms: int | None = None) -> list[PrefixStatus]:
    """The state of each prefix of ``catalog`` (see :meth:`PrefixCatalog.refresh`), by prefix."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    opened, touched = _open_transactions_by_prefix(session, list(catalog.records), now_ms)
    sink = {prefix: sorted(catalog.partitions.get(prefix, set()) | touched.get(prefix, set())) for prefix in catalog.records}
    sources = {prefix: sorted(catalog.sources.get(prefix, set())) for prefix in catalog.records}
    offsets = stable_and_written(options, sorted({tp for tps in (*sink.values(), *sources.values()) for tp in tps}))
    return [
        PrefixStatus(
            prefix=prefix, state=_state(record), owner=_owner(record), last_epoch=record.epoch_id,
            last_written_ms=record.written_at_ms, age_ms=max(now_ms - record.written_at_ms, 0),
            consumer_group=record.consumer_group, open_transactions=tuple(opened.get(prefix, ())),
            sink_partitions=tuple(PartitionOffsets(t, p, *offsets[(t, p)]) for t, p in sink[prefix] if (t, p) in offsets),
            source_partitions=tuple(PartitionOffsets(t, p, *offsets[(t, p)]) for t, p in sources[prefix] if (t, p) in offsets),
            replay_proof=None if record.input is None else record.input.proof,
        )
        for prefix, record in sorted(catalog.records.items())
    ]


def _consumed(record: LogRecord) -> set[PartitionKey]:
    """The source partitions a record says its epoch consumed: its offsets (source columns, or a group's), or the
    Kafka sources of Spark's offset log."""
    found = {(topic, partition) for topic, partition, _ in record.offsets}
    positions = None if record.input is None else kafka_positions(record.input)
    if positions is not None:
        found.update((topic, partition) for topic, partition, _ in positions[0])
    return found


def decision_log_exists(options: WriterOptions) -> bool:
    """Whether the decision log topic exists (the operator tools never create it)."""
    return bool(existing_partitions(options, [options.decision_log_topic]))


def _state(record: LogRecord) -> PrefixState:
    if record.kind == "decision":
        return "decided-not-finished"
    return "reset" if record.kind == "reset" else "complete"


def _owner(record: LogRecord) -> str:
    """The run that last wrote the prefix: a streaming query's id or a batch write's writeId."""
    epoch = record.previous_epoch if record.kind == "reset" else record.epoch
    if epoch is None or epoch.kind == "reset":
        return "none (reset)"
    return f"{'query' if epoch.kind == 'stream' else 'writeId'} {epoch.run_id}"


def _open_transactions_by_prefix(session: TransactionClient, prefixes: Sequence[str], now_ms: int
                                 ) -> tuple[dict[str, list[OpenTransaction]], dict[str, set[PartitionKey]]]:
    """The open transactions of each prefix, and the partitions they write to."""
    listed = [t.transactional_id for t in session.list_transactions(state_filters=[TxnState.ONGOING.value])]
    known = set(prefixes)
    owner = {tid: prefix for tid in listed if (prefix := _prefix_of(tid, known)) is not None}
    described: Mapping[str, TxnDescription] = session.describe(sorted(owner)) if owner else {}
    by_prefix: dict[str, list[OpenTransaction]] = {}
    touched: dict[str, set[PartitionKey]] = {}
    for tid, d in sorted(described.items()):
        if d.state != TxnState.ONGOING or tid not in owner:
            continue
        age = max(now_ms - d.transaction_start_time_ms, 0) if d.transaction_start_time_ms > 0 else 0
        by_prefix.setdefault(owner[tid], []).append(OpenTransaction(tid, age, d.transaction_timeout_ms))
        touched.setdefault(owner[tid], set()).update((t, p) for t, ps in d.topic_partitions.items() for p in ps)
    return by_prefix, touched


def _prefix_of(transactional_id: str, prefixes: set[str]) -> str | None:
    """The prefix of ``prefixes`` whose task or coordinator id ``transactional_id`` is: what precedes its last four
    dash-separated parts (``<prefix>-<run>-<generation>-<partition>-<attempt>``) or its last one
    (``<prefix>-coordinator``); a look-up per id, not a match against every prefix."""
    for parts in (4, 1):
        candidate = transactional_id.rsplit("-", parts)[0]
        if candidate in prefixes and belongs_to_prefix(candidate, transactional_id):
            return candidate
    return None


def offset_lookup(options: WriterOptions, topics: Sequence[str], isolation: str) -> KafkaOffsetLookup:
    """The reader's offset look-up on ``topics``, with the sink's connection."""
    return KafkaOffsetLookup(internal_read_options(options.connection, _subscription(topics), isolation))


def existing_partitions(options: WriterOptions, topics: Sequence[str]) -> list[PartitionKey]:
    """The partitions of those of ``topics`` that exist."""
    return offset_lookup(options, topics, "read_committed").partitions(_subscription(topics), must_exist=False)


def _subscription(topics: Sequence[str]) -> Subscription:
    return Subscription("subscribe", topics=tuple(dict.fromkeys(t.strip() for t in topics if t.strip())))


def last_stable(options: WriterOptions, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, int]:
    """The last stable offset of those of ``partitions`` whose topic still exists."""
    topics, present = _present(options, partitions)
    return offset_lookup(options, topics, "read_committed").latest(present) if present else {}


def stable_and_written(options: WriterOptions, partitions: Sequence[PartitionKey]) -> dict[PartitionKey, tuple[int, int]]:
    """(last stable offset, high watermark) of those of ``partitions`` whose topic still exists."""
    topics, present = _present(options, partitions)
    if not present:
        return {}
    # High watermark first: traffic between the two requests can then only make the LSO look higher,
    # never flag a partition without an open transaction as pinned.
    written = offset_lookup(options, topics, "read_uncommitted").latest(present)
    stable = offset_lookup(options, topics, "read_committed").latest(present)
    return {tp: (stable[tp], written[tp]) for tp in present}


def _present(options: WriterOptions, partitions: Sequence[PartitionKey]) -> tuple[list[str], list[PartitionKey]]:
    topics = list(dict.fromkeys(topic for topic, _ in partitions))
    existing = set(existing_partitions(options, topics)) if topics else set()
    return topics, [tp for tp in partitions if tp in existing]
