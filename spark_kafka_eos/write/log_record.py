"""The records of the decision log, and their JSON format (see :mod:`spark_kafka_eos.write.decision_log`).

A ``decision`` names the participants of an epoch; ``complete`` follows its phase 2; ``reset``
(from the CLI) forgets a prefix.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Literal, Optional

from spark_kafka_eos.errors import KafkaEosDecisionLogError
from spark_kafka_eos.txn.session import PreparedTxnState

FORMAT_VERSION = 1
RecordKind = Literal["decision", "complete", "reset"]


@dataclass(frozen=True)
class Participant:
    """One task attempt's prepared transaction, as decided."""

    transactional_id: str
    producer_id: int
    epoch: int
    spark_partition: int
    records: tuple[tuple[str, int, int], ...] = ()

    @property
    def state(self) -> PreparedTxnState:
        return PreparedTxnState(self.transactional_id, self.producer_id, self.epoch)

    def describe_output(self) -> str:
        return ", ".join(f"{t}-{p}: {n} records" for t, p, n in self.records) or "no records"


@dataclass(frozen=True)
class LogRecord:
    """One record of the decision log. ``epoch_id`` names the Spark epoch: ``stream:<batchId>``
    for a micro-batch, ``batch:<writeId>`` for a whole batch job."""

    kind: RecordKind
    prefix: str
    epoch_id: str
    participants: tuple[Participant, ...] = ()
    consumer_group: Optional[str] = None
    offsets: tuple[tuple[str, int, int], ...] = ()
    written_at_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    @property
    def batch_id(self) -> Optional[int]:
        """The micro-batch id of a streaming epoch, None for a batch job."""
        kind, _, value = self.epoch_id.partition(":")
        return int(value) if kind == "stream" else None

    def completed(self) -> "LogRecord":
        return LogRecord("complete", self.prefix, self.epoch_id, consumer_group=self.consumer_group, offsets=self.offsets)

    def to_json(self) -> bytes:
        body = asdict(self)
        body["format"] = FORMAT_VERSION
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> "LogRecord":
        body = json.loads(raw)
        if body.get("format") != FORMAT_VERSION:
            raise KafkaEosDecisionLogError(
                f"Decision log record of format {body.get('format')!r}; this version reads format {FORMAT_VERSION}. "
                "Upgrade spark-kafka-eos."
            )
        participants = tuple(
            Participant(
                p["transactional_id"], p["producer_id"], p["epoch"], p["spark_partition"],
                tuple(tuple(r) for r in p["records"]),  # type: ignore[misc]
            )
            for p in body["participants"]
        )
        return cls(
            body["kind"], body["prefix"], body["epoch_id"], participants, body.get("consumer_group"),
            tuple(tuple(o) for o in body.get("offsets", ())), body["written_at_ms"],  # type: ignore[misc]
        )


def stream_epoch(batch_id: int) -> str:
    return f"stream:{batch_id}"


def batch_epoch(write_id: str) -> str:
    return f"batch:{write_id}"
