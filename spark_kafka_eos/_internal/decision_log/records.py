"""The records of the decision log, and their JSON format (see :mod:`spark_kafka_eos._internal.decision_log.kafka_log`).

A ``decision`` names the participants of an epoch; ``complete`` follows its phase 2; ``reset``
(from the CLI) hands a prefix over and remembers who owned it before.

Every record carries the prefix's *history*: the last epoch each run decided on the prefix (a batch job's
write id, a stream's query id and its last micro-batch), at most :data:`HISTORY_LIMIT` runs, oldest
dropped first. Compaction keeps only the prefix's last record, so the history rides along in it: an
earlier write id re-run after later jobs, or after a ``reset``, is still recognised.

An epoch is identified by the run that owns it and, for a stream, the micro-batch: see :class:`EpochId`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal, get_args

from spark_kafka_eos._internal.txn.session import PreparedTxnState
from spark_kafka_eos.errors import KafkaEosDecisionLogError

FORMAT_VERSION = 4
"""3: a record carries partly lost epochs, group positions and archives; 4: the input each epoch consumed
(:class:`EpochInput`). A version that reads only an older format would drop them on its next record, so it must
refuse (loud) rather than read it."""
_READABLE_FORMATS = (1, 2, 3, FORMAT_VERSION)
HISTORY_LIMIT = 1000
"""Runs a prefix's last record remembers itself (e.g. ~2.7 years of daily backfills); each costs ~70 bytes of
every record. Older runs are archived, :data:`ARCHIVE_BATCH` at a time (see :func:`archive_overflow`)."""
ARCHIVE_BATCH = 500
ArchiveRef = tuple[int, str]
"""(offset, digest of its value): an archive record of the prefix's oldest runs in the decision log."""
RecordKind = Literal["decision", "complete", "reset"]
ReplayProof = Literal["offset_log", "digest", "row_count"]
REPLAY_PROOFS: tuple[ReplayProof, ...] = get_args(ReplayProof)
EpochKind = Literal["stream", "batch", "reset"]
Position = tuple[str, int, int]
"""(topic, partition, offset)."""
HistoryEntry = tuple[str, int]
"""(epoch id as text, when it was decided in ms): the last epoch one run decided."""
GroupPosition = tuple[str, str, int, int]
"""(consumer group, topic, partition, offset): where the prefix last committed a group's offset."""
GROUP_POSITIONS_LIMIT = 10_000
"""Group offsets a prefix remembers (the most recently committed groups' are kept)."""
BatchInput = tuple[str, int] | tuple[str, int, str]
"""(a batch job's epoch id as text, the rows its input had[, their digest]): no digest in a record of an older version."""
Aborting = tuple[str, int, int]
"""A transaction a sweep aborts: (transactional id, producer id, producer epoch)."""


@dataclass(frozen=True)
class EpochId:
    """Who owns an epoch: ``run_id`` is the streaming query id (``sql.streaming.queryId``: the same
    across restarts of one checkpoint, new for a new checkpoint) or a batch job's write id.
    ``batch_id`` is the micro-batch of a stream, None otherwise. Spelt ``stream:<run>:<batch>``,
    ``batch:<run>`` or ``reset:<time>``."""

    kind: EpochKind
    run_id: str
    batch_id: int | None = None

    @classmethod
    def stream(cls, query_id: str, batch_id: int) -> EpochId:
        return cls("stream", query_id, batch_id)

    @classmethod
    def batch(cls, write_id: str) -> EpochId:
        return cls("batch", write_id)

    @classmethod
    def parse(cls, text: str) -> EpochId:
        kind, _, rest = text.partition(":")
        if kind == "stream":
            run, _, batch = rest.rpartition(":")  # format 1 wrote "stream:<batch>": its run is unknown ("")
            return cls("stream", run, int(batch))
        if kind in ("batch", "reset"):
            return cls(kind, rest)  # type: ignore[arg-type]
        raise KafkaEosDecisionLogError(f"Decision log record with an unknown epoch id {text!r}. Upgrade spark-kafka-eos.")

    def same_run(self, other: EpochId) -> bool:
        return self.kind == other.kind and self.run_id == other.run_id

    @property
    def run_key(self) -> str:
        """``<kind>:<run>``: the same for every epoch of one run."""
        return f"{self.kind}:{self.run_id}"

    def __str__(self) -> str:
        if self.kind == "stream":
            return f"stream:{self.run_id}:{self.batch_id}"
        return f"{self.kind}:{self.run_id}"

    def describe(self) -> str:
        """For error messages."""
        if self.kind == "stream":
            return f"micro-batch {self.batch_id} of streaming query {self.run_id or '(unknown: written by an older version)'}"
        if self.kind == "batch":
            return f"batch write {self.run_id}"
        return "a reset"


@dataclass(frozen=True)
class Participant:
    """One task attempt's prepared transaction, as decided. ``probe`` is where its first record
    landed: if that record is visible to a read_committed reader, the transaction committed."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    spark_partition: int
    records: tuple[tuple[str, int, int], ...] = ()
    probe: Position | None = None
    probe_digest: str | None = None
    """:func:`~spark_kafka_eos._internal.write.visibility.record_digest` of the probe's record (None in older records)."""

    @property
    def txn(self) -> PreparedTxnState:
        """The identity of its transaction."""
        return PreparedTxnState(self.transactional_id, self.producer_id, self.producer_epoch)

    def describe_output(self) -> str:
        return ", ".join(f"{t}-{p}: {n} records" for t, p, n in self.records) or "no records"


@dataclass(frozen=True)
class EpochInput:
    """What an epoch consumed, so that a replay can prove it is the same input (see
    :mod:`~spark_kafka_eos._internal.write.epoch_input`). ``rows``: the rows the sink was handed, over every task.
    ``source_end`` / ``source_start``: a stream's source offsets from Spark's offset log (one normalised JSON per
    source) for the micro-batch and the one before (empty for micro-batch 0); None where they could not be read.
    ``source_columns``: where the offset log could not be read and the rows carry source columns, the next offset
    per source partition they name."""

    rows: int
    source_end: tuple[str, ...] | None = None
    source_start: tuple[str, ...] | None = None
    source_columns: tuple[tuple[str, int, int], ...] | None = None
    digest: str | None = None
    """The order-independent digest of the rows the epoch wrote (:mod:`~spark_kafka_eos._internal.write.row_digest`);
    None in a decision of an older version, or where a task did not report one."""

    @property
    def proof(self) -> ReplayProof:
        """What proves a replay of the epoch the same input: Spark's offset log, else the rows' digest, else (a
        decision of an older version) their count."""
        if self.source_end is not None:
            return "offset_log"
        return "digest" if self.digest is not None else "row_count"

    def to_dict(self) -> dict[str, object]:
        body: dict[str, object] = {"rows": self.rows,
                                   "source_end": None if self.source_end is None else list(self.source_end),
                                   "source_start": None if self.source_start is None else list(self.source_start)}
        if self.source_columns is not None:
            body["source_columns"] = [list(position) for position in self.source_columns]
        if self.digest is not None:
            body["digest"] = self.digest
        return body

    @classmethod
    def from_dict(cls, body: dict[str, object] | None) -> EpochInput | None:
        if body is None:
            return None
        end, start, columns = body.get("source_end"), body.get("source_start"), body.get("source_columns")
        return cls(int(body["rows"]),  # type: ignore[call-overload]
                   None if end is None else tuple(str(s) for s in end),  # type: ignore[attr-defined]
                   None if start is None else tuple(str(s) for s in start),  # type: ignore[attr-defined]
                   None if columns is None else tuple((str(t), int(p), int(o)) for t, p, o in columns),  # type: ignore[attr-defined]
                   None if body.get("digest") is None else str(body["digest"]))


@dataclass(frozen=True)
class LogRecord:
    """One record of the decision log; ``epoch_id`` is an :class:`EpochId` as text. A ``reset``
    names the epoch that was last before it in ``previous_epoch_id``."""

    kind: RecordKind
    prefix: str
    epoch_id: str
    participants: tuple[Participant, ...] = ()
    consumer_group: str | None = None
    offsets: tuple[Position, ...] = ()
    written_at_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    previous_epoch_id: str | None = None
    history: tuple[HistoryEntry, ...] = ()
    partly_lost: tuple[str, ...] = ()
    """Epochs decided whose output is only partly there: a ``reset --accept-data-loss`` accepted the loss of
    some of their participants. A re-run of one can neither be skipped nor written whole: it is refused."""
    group_positions: tuple[GroupPosition, ...] = ()
    """Where this prefix last committed each ``consumerGroup``'s offsets: Kafka expires a memberless group's
    offsets (``offsets.retention.minutes``) and operators delete groups; this copy does not expire."""
    archives: tuple[ArchiveRef, ...] = ()
    """The archive records of the runs that no longer fit in ``history``, oldest first."""
    starts: tuple[Position, ...] = ()
    """A decision with a ``consumer_group``: the first source offset its epoch consumed per partition, where a
    ``reset --accept-data-loss`` that forgets the epoch moves the group back to."""
    input: EpochInput | None = None
    """What the epoch of a ``decision`` (and of its ``complete``) consumed; None in older records."""
    batch_inputs: tuple[BatchInput, ...] = ()
    """The rows each batch job the prefix remembers consumed, so that a ``writeId`` re-run over other input is told."""
    aborting: tuple[Aborting, ...] = ()
    """A sweep's proof of ownership (the last record appended again): the transactions it is about to abort, each
    by the exact instance it listed. A driver that fenced after it never decides one of them."""

    @property
    def epoch(self) -> EpochId:
        return EpochId.parse(self.epoch_id)

    @property
    def previous_epoch(self) -> EpochId | None:
        return None if self.previous_epoch_id is None else EpochId.parse(self.previous_epoch_id)

    @property
    def batch_id(self) -> int | None:
        """The micro-batch id of a streaming epoch, None otherwise."""
        return self.epoch.batch_id

    def completed(self) -> LogRecord:
        return LogRecord("complete", self.prefix, self.epoch_id, consumer_group=self.consumer_group, offsets=self.offsets,
                         history=self.runs(), partly_lost=self.partly_lost, group_positions=self.group_positions,
                         archives=self.archives, input=self.input, batch_inputs=self.batch_inputs)

    def batch_input_rows(self, epoch: EpochId) -> int | None:
        """The rows batch job ``epoch`` consumed, if the prefix remembers them."""
        if self.input is not None and self.epoch == epoch:
            return self.input.rows
        return next((entry[1] for entry in reversed(self.batch_inputs) if entry[0] == str(epoch)), None)

    def batch_input_digest(self, epoch: EpochId) -> str | None:
        """The digest of the rows batch job ``epoch`` wrote, if the prefix remembers it."""
        if self.input is not None and self.epoch == epoch:
            return self.input.digest
        entry = next((entry for entry in reversed(self.batch_inputs) if entry[0] == str(epoch)), None)
        return entry[2] if entry is not None and len(entry) > 2 else None

    def batch_input_dropped(self, epoch: EpochId) -> bool:
        """True when batch job ``epoch`` has no input in this record while its window of inputs is full: the input may
        have been recorded and dropped since (a job older than the last :data:`HISTORY_LIMIT`)."""
        return self.batch_input_rows(epoch) is None and len(self.batch_inputs) >= HISTORY_LIMIT

    def group_position(self, group: str) -> dict[tuple[str, int], int]:
        """Where this prefix last committed ``group``'s offsets, per (topic, partition)."""
        return {(t, p): o for g, t, p, o in self.group_positions if g == group}

    def runs(self) -> tuple[HistoryEntry, ...]:
        """The last epoch of every run this prefix decided (a record written before histories were kept
        knows only its own)."""
        if self.history:
            return self.history
        if self.kind == "reset":
            return () if self.previous_epoch_id is None else ((self.previous_epoch_id, self.written_at_ms),)
        return ((self.epoch_id, self.written_at_ms),)

    def last_decided(self, epoch: EpochId) -> EpochId | None:
        """The last epoch of ``epoch``'s run that this prefix decided, or None."""
        key = epoch.run_key
        for epoch_id, _ in reversed(self.runs()):
            remembered = EpochId.parse(epoch_id)
            if remembered.run_key == key:
                return remembered
        return None


    def announced_aborts(self, transactions: Iterable[PreparedTxnState]) -> list[PreparedTxnState]:
        """Those of ``transactions`` that a sweep announced in this record it aborts."""
        return announced_among(self.aborting, transactions)

    def to_json(self) -> bytes:
        body = asdict(self)
        if not self.aborting:
            del body["aborting"]  # only a sweep's proof carries it
        body["participants"] = [{"epoch" if key == "producer_epoch" else key: value for key, value in participant.items()}
                                for participant in body["participants"]]  # the record's field name is "epoch"
        body["input"] = None if self.input is None else self.input.to_dict()
        body["format"] = FORMAT_VERSION
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> LogRecord:
        body = json.loads(raw)
        if body.get("format") not in _READABLE_FORMATS:
            raise KafkaEosDecisionLogError(
                f"Decision log record of format {body.get('format')!r}; this version reads formats "
                f"{', '.join(map(str, _READABLE_FORMATS))}. Upgrade spark-kafka-eos."
            )
        participants = tuple(
            Participant(
                p["transactional_id"], p["producer_id"], p["epoch"], p["spark_partition"],
                tuple(tuple(r) for r in p["records"]),
                tuple(p["probe"]) if p.get("probe") else None,
                p.get("probe_digest"),
            )
            for p in body["participants"]
        )
        return cls(
            body["kind"], body["prefix"], body["epoch_id"], participants, body.get("consumer_group"),
            tuple(tuple(o) for o in body.get("offsets", ())), body["written_at_ms"],
            body.get("previous_epoch_id"),
            tuple((str(e), int(t)) for e, t in body.get("history", ())),
            tuple(str(e) for e in body.get("partly_lost", ())),
            tuple((str(g), str(t), int(p), int(o)) for g, t, p, o in body.get("group_positions", ())),
            tuple((int(o), str(d)) for o, d in body.get("archives", ())),
            tuple((str(t), int(p), int(o)) for t, p, o in body.get("starts", ())),
            EpochInput.from_dict(body.get("input")),
            tuple(_batch_input(entry) for entry in body.get("batch_inputs", ())),
            tuple((str(t), int(p), int(e)) for t, p, e in body.get("aborting", ())),
        )


def history_with(last: LogRecord | None, epoch: EpochId, now_ms: int) -> tuple[HistoryEntry, ...]:
    """The history after ``epoch`` is decided: its run's entry moves to the end; the oldest runs beyond
    :data:`HISTORY_LIMIT` are forgotten."""
    key = epoch.run_key
    kept = [entry for entry in (last.runs() if last is not None else ()) if EpochId.parse(entry[0]).run_key != key]
    kept.append((str(epoch), now_ms))
    return tuple(kept[-(HISTORY_LIMIT + ARCHIVE_BATCH):])  # the log archives the oldest before it gets here


def archive_overflow(history: tuple[HistoryEntry, ...]) -> tuple[tuple[HistoryEntry, ...], tuple[HistoryEntry, ...]] | None:
    """(runs to archive, runs kept) once ``history`` has grown :data:`ARCHIVE_BATCH` past :data:`HISTORY_LIMIT`;
    else None. Archiving a batch at a time keeps the archives few (one per 500 runs)."""
    if len(history) < HISTORY_LIMIT + ARCHIVE_BATCH:
        return None
    return history[:ARCHIVE_BATCH], history[ARCHIVE_BATCH:]


def memory_after(last: LogRecord | None, consumer_group: str | None = None,
                 offsets: tuple[Position, ...] = (), batch_input: BatchInput | None = None) -> dict[str, tuple[object, ...]]:
    """What a new record carries over from ``last`` besides the history (as keyword arguments of
    :class:`LogRecord`): the partly lost epochs, the batch jobs' input rows (with ``batch_input`` when the new
    record decides a batch job), and the group positions, moved by ``offsets`` when the new record commits
    ``consumer_group``'s offsets."""
    inputs = [i for i in (last.batch_inputs if last is not None else ()) if batch_input is None or i[0] != batch_input[0]]
    if batch_input is not None:
        inputs.append(batch_input)
    positions = list(last.group_positions) if last is not None else []
    if consumer_group and offsets:
        moved = {(t, p) for t, p, _ in offsets}
        positions = [g for g in positions if not (g[0] == consumer_group and (g[1], g[2]) in moved)]
        positions += [(consumer_group, t, p, o) for t, p, o in offsets]
    return {"partly_lost": last.partly_lost if last is not None else (),
            "group_positions": tuple(positions[-GROUP_POSITIONS_LIMIT:]),
            "archives": last.archives if last is not None else (),
            "batch_inputs": tuple(inputs[-HISTORY_LIMIT:])}


def history_without(last: LogRecord, epoch: EpochId) -> tuple[HistoryEntry, ...]:
    """``last``'s history with ``epoch`` forgotten, as if never decided (every record of it is lost): a
    batch job's entry goes, a stream's steps back to the micro-batch before."""
    kept: list[HistoryEntry] = []
    for epoch_id, at_ms in last.runs():
        remembered = EpochId.parse(epoch_id)
        if remembered != epoch:
            kept.append((epoch_id, at_ms))
        elif epoch.kind == "stream" and epoch.batch_id:
            kept.append((str(EpochId.stream(epoch.run_id, epoch.batch_id - 1)), at_ms))
    return tuple(kept)


def _batch_input(entry: Sequence[object]) -> BatchInput:
    if len(entry) > 2 and entry[2]:
        return (str(entry[0]), int(entry[1]), str(entry[2]))  # type: ignore[call-overload]
    return (str(entry[0]), int(entry[1]))  # type: ignore[call-overload]


def announced_among(aborting: Iterable[Aborting], transactions: Iterable[PreparedTxnState]) -> list[PreparedTxnState]:
    """Those of ``transactions`` that a sweep announced (``aborting``) it aborts."""
    announced = {PreparedTxnState(*a) for a in aborting}
    return [t for t in transactions if t in announced]


ANNOUNCEMENT_FORMAT = "kafka-eos-sweep-announcement-1"


def announcement_to_json(prefix: str, aborting: Sequence[Aborting]) -> bytes:
    """A sweep's announcement on a prefix without records: the transactions it is about to abort."""
    return json.dumps({"format": ANNOUNCEMENT_FORMAT, "prefix": prefix, "aborting": [list(a) for a in aborting]},
                      separators=(",", ":")).encode()


def announcement_from_json(value: bytes) -> tuple[Aborting, ...]:
    body = json.loads(value)
    if body.get("format") != ANNOUNCEMENT_FORMAT:
        raise KafkaEosDecisionLogError(f"A sweep's announcement in the decision log has format {body.get('format')!r}, which "
                                       "this version cannot read: a newer version of spark-kafka-eos wrote it. Upgrade.")
    return tuple((str(t), int(p), int(e)) for t, p, e in body["aborting"])
