"""What the operator tools print: text lines, or with ``--json`` one JSON object (:class:`Output`), and the lines of
each command's findings."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from spark_kafka_eos._internal.config.reader import PartitionKey
from spark_kafka_eos._internal.config.writer import WriterOptions
from spark_kafka_eos._internal.decision_log.records import LogRecord
from spark_kafka_eos._internal.ops.prefix_status import PrefixStatus
from spark_kafka_eos._internal.txn.session import TxnDescription


class Output:
    """What a command reports: text lines on stdout, or, with ``--json``, its fields as one JSON object at the end."""

    def __init__(self, command: str, as_json: bool) -> None:
        self.as_json = as_json
        self.fields: dict[str, object] = {"command": command}

    def line(self, text: str) -> None:
        if not self.as_json:
            print(text)

    def set(self, **fields: object) -> None:
        self.fields.update(fields)

    def finish(self, exit_code: int) -> int:
        if self.as_json:
            print(json.dumps({**self.fields, "exit_code": exit_code}))
        return exit_code


@dataclass(frozen=True)
class PartitionOffsets:
    """Last stable offset vs high watermark of one topic-partition."""

    topic: str
    partition: int
    last_stable: int
    high_watermark: int

    @property
    def pinned(self) -> bool:
        """True when an open transaction holds read_committed consumers below the high watermark."""
        return self.last_stable < self.high_watermark


def lag_lines(group: str, rows: Sequence[tuple[PartitionKey, int | None, int, int]]) -> list[str]:
    """One line per partition, and the total; a partition without a group offset has no lag figure."""
    lines, total = [], 0
    for (topic, partition), offset, stable, written in rows:
        lag = None if offset is None else max(stable - offset, 0)
        total += lag or 0
        lines.append(f"topic {topic} partition {partition}: group offset {'none' if offset is None else offset}, "
                     f"last stable offset {stable}, high watermark {written}, lag {'-' if lag is None else lag}")
    return lines + [f"group {group}: total lag {total}"]


def record_lines(record: LogRecord | None, now_ms: int, states: Mapping[str, TxnDescription]) -> list[str]:
    """The last decision-log record: kind, epoch, participants, consumer group offsets, time."""
    if record is None:
        return ["last record: none"]
    lines = [f"last record: {record.kind} {record.epoch_id}, written {_utc(record.written_at_ms)} "
             f"({_duration(now_ms - record.written_at_ms)} ago)"]
    for p in record.participants:
        now = states.get(p.transactional_id)
        lines.append(f"  participant {p.transactional_id}: spark partition {p.spark_partition}, producer {p.producer_id} "
                     f"epoch {p.producer_epoch}, {p.describe_output()}" + (f"; now {now.state}" if now else ""))
    if record.consumer_group:
        offsets = ", ".join(f"{t}-{p} -> {o}" for t, p, o in record.offsets) or "none"
        lines.append(f"  consumer group {record.consumer_group}: {offsets}")
    if record.kind == "decision":
        lines.append("  (not recorded complete yet: `recover` or the query's next epoch rolls it forward)")
    return lines


def transaction_lines(transactions: Sequence[TxnDescription], now_ms: int) -> list[str]:
    """One line per open transaction: state, producer id / epoch, age, timeout, partitions."""
    if not transactions:
        return ["open transactions: none"]
    return [f"open transactions: {len(transactions)}"] + [_transaction_line(d, now_ms) for d in transactions]


def _transaction_line(d: TxnDescription, now_ms: int) -> str:
    partitions = ", ".join(f"{t}-{p}" for t, ps in sorted(d.topic_partitions.items()) for p in ps) or "none"
    timing = f"timeout {_duration(d.transaction_timeout_ms)}"
    if d.transaction_start_time_ms >= 0:
        age_ms = now_ms - d.transaction_start_time_ms
        left_ms = max(d.transaction_timeout_ms - age_ms, 0)
        timing = f"started {_duration(age_ms)} ago, {timing} ({_duration(left_ms)} left)"
    return (f"  {d.transactional_id}: {d.state}, producer {d.producer_id} epoch {d.producer_epoch}, "
            f"{timing}, partitions {partitions}")


def transaction_json(d: TxnDescription, now_ms: int) -> dict[str, object]:
    age_ms = now_ms - d.transaction_start_time_ms if d.transaction_start_time_ms >= 0 else None
    return {"transactional_id": d.transactional_id, "state": d.state, "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch, "timeout_ms": d.transaction_timeout_ms, "age_ms": age_ms,
            "partitions": [{"topic": t, "partition": p} for t, ps in sorted(d.topic_partitions.items()) for p in ps]}


def status_line(status: PrefixStatus) -> str:
    """One prefix of ``list``: state, owner, last epoch and age, open transactions, LSO lag."""
    oldest = status.oldest_open
    opened = ("no open transactions" if oldest is None else
              f"{len(status.open_transactions)} open, oldest {_duration(oldest.age_ms)} of its {_duration(oldest.timeout_ms)} "
              f"timeout ({oldest.transactional_id})")
    lag = sum(p.lso_lag for p in status.sink_partitions)
    pinned = [f"{p.topic}-{p.partition}" for p in status.sink_partitions if p.lso_lag]
    return (f"{status.prefix}: {status.state}, {status.owner}, last epoch {status.last_epoch} "
            f"({_duration(status.age_ms)} ago); {opened}; sink LSO lag {lag}"
            + (f" ({', '.join(pinned)})" if pinned else ""))


def offset_lines(offsets: Sequence[PartitionOffsets]) -> list[str]:
    """One line per partition; a partition whose LSO is below its high watermark is flagged PINNED."""
    return [f"topic {o.topic} partition {o.partition}: last stable offset {o.last_stable}, high watermark "
            f"{o.high_watermark}" + (f", PINNED ({o.high_watermark - o.last_stable} offsets held back by an open "
                                     "transaction)" if o.pinned else ", stable") for o in offsets]


def last_summary(options: WriterOptions, log_exists: bool, last: LogRecord | None) -> str:
    """Why there is nothing to roll forward or reset."""
    if not log_exists:
        return f"decision log topic {options.decision_log_topic} does not exist"
    if last is None:
        return f"prefix {options.prefix} has no record in {options.decision_log_topic}"
    return f"the last record of prefix {options.prefix} is {last.kind} {last.epoch_id}"


def reset_plan(options: WriterOptions, last: LogRecord, transactions: Sequence[TxnDescription]) -> list[str]:
    """What ``reset --yes`` would do."""
    open_ids = ", ".join(d.transactional_id for d in transactions) or "none"
    roll = (f"roll forward decision {last.epoch_id} ({len(last.participants)} participant(s))"
            if last.kind == "decision" else f"nothing to roll forward (last record: {last.kind} {last.epoch_id})")
    return [
        f"reset of prefix {options.prefix} (last record: {last.kind} {last.epoch_id}) would:",
        f"  1. {roll}",
        f"  2. abort every open transaction of the prefix (now: {open_ids})",
        f"  3. append a reset record to {options.decision_log_topic}, so that a new query (new checkpoint) may "
        "use this prefix from micro-batch 0",
        "Do this only when the query that used this prefix is gone for good. Nothing was changed; "
        "re-run with --yes to do it.",
    ]


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _duration(ms: int) -> str:
    seconds = ms / 1000
    return f"{seconds:.1f}s" if seconds < 120 else f"{seconds / 60:.1f}min"
