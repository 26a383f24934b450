"""The mark a decision leaves on the consumer group whose offsets it moves (option ``consumerGroup``).

The decision commits the group's offsets in its own transaction, before phase 2 makes the participants'
records visible. Until then the group points past records that only a roll-forward of that decision
makes visible. So every committed offset carries, as its metadata, the decision that moved it: whoever
resumes from the group (a reader with ``startingOffsets=group``, a sink of another prefix on the group)
finds that decision and rolls it forward first, or fails loudly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

MARKER_FORMAT = "kafka-eos-decision-1"


@dataclass(frozen=True, order=True)
class GroupMarker:
    """Which decision (prefix and epoch, in which decision log) moved a group's offset."""

    log_topic: str
    prefix: str
    epoch_id: str

    def to_metadata(self) -> str:
        body = {"format": MARKER_FORMAT, "log": self.log_topic, "prefix": self.prefix, "epoch": self.epoch_id}
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def parse(cls, metadata: str | None) -> GroupMarker | None:
        """The marker in an offset's metadata; None for offsets committed by anything else."""
        if not metadata or not metadata.startswith("{"):
            return None
        try:
            body = json.loads(metadata)
        except ValueError:
            return None
        if not isinstance(body, dict) or body.get("format") != MARKER_FORMAT:
            return None
        return cls(str(body["log"]), str(body["prefix"]), str(body["epoch"]))
