"""What an epoch consumed (its input identity), and whether a replay of it consumed the same.

A stream's micro-batch is identified by Spark's own offset log, ``<checkpointLocation>/offsets/<batchId>``, which
Spark writes before the batch runs and replays from: its source lines (one JSON per source, whatever the source)
for the batch and the batch before are the range the batch consumed. An operator who deletes the last offset file
("reprocess the last batch"), restores an older checkpoint snapshot or copies one makes Spark plan the batch again,
over other offsets: the same epoch id, other input. Every epoch also counts the rows the sink was handed.

The offset log is read with pyarrow's file systems (local paths, ``file:``, ``s3://``/``s3a://``, ``gs://``,
``hdfs://``, ``abfs(s)://``; ``dbfs:/`` through Databricks' ``/dbfs`` mount). Where it cannot be read, the input is
known by its row count alone.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from spark_kafka_eos._internal.decision_log.records import EpochInput, Position
from spark_kafka_eos._internal.read.reader import ORIGIN_KEY
from spark_kafka_eos._internal.read.topic_identity import TOPIC_IDS_KEY
from spark_kafka_eos._internal.write.spark_checkpoint import read_checkpoint_file as _read_text

log = logging.getLogger(__name__)


def stream_input(checkpoint_location: str | None, batch_id: int, rows: int) -> EpochInput:
    """The input of micro-batch ``batch_id``: ``rows`` and, when the checkpoint can be read, its offset log."""
    if checkpoint_location is None:
        return EpochInput(rows)
    end = read_offset_log(checkpoint_location, batch_id)
    start: tuple[str, ...] | None = ()
    if batch_id > 0:
        start = read_offset_log(checkpoint_location, batch_id - 1)
    return EpochInput(rows, end, start if end is not None else None)


def read_offset_log(checkpoint_location: str, batch_id: int) -> tuple[str, ...] | None:
    """The source offsets Spark's offset log holds for ``batch_id`` (one normalised JSON per source; ``-`` for a
    source without offsets), or None if the file cannot be read."""
    try:
        text = _read_text(f"{checkpoint_location.rstrip('/')}/offsets/{batch_id}")
    except Exception as err:  # noqa: BLE001 - unreadable: the input is then known by its row count
        log.info("Cannot read Spark's offset log of micro-batch %d under %s (%s): the replay check uses row counts",
                 batch_id, checkpoint_location, err)
        return None
    lines = text.splitlines()
    if len(lines) < 2 or not lines[0].startswith("v"):
        log.warning("Spark's offset log of micro-batch %d under %s has an unknown format", batch_id, checkpoint_location)
        return None
    return tuple(_normalised(line) for line in lines[2:])


def input_difference(decided: EpochInput, replay: EpochInput) -> str | None:
    """Why ``replay`` cannot be taken for a replay of the epoch that consumed ``decided``, or None if it can.
    Equal offsets from Spark's offset log prove the same input (other rows over them only mean the query is not a
    function of its input, which the decision already settled). Else the rows must be the same: equal digests of the
    rows written prove it; without a digest on both sides (a decision of an older version), equal row counts are
    taken for it."""
    if decided.source_end is not None and replay.source_end is not None:
        if (decided.source_start, decided.source_end) != (replay.source_start, replay.source_end):
            return "its source offsets differ"
        if decided.rows != replay.rows or _digests_differ(decided, replay):
            log.warning("A replay over the same source offsets wrote other rows (%d, digest %s) than the decision (%d, "
                        "digest %s): the query's output is not a function of its input (a join with a changing table, a "
                        "non-deterministic function); the decided output stands", replay.rows, replay.digest,
                        decided.rows, decided.digest)
        return None
    if decided.source_columns is not None and replay.source_columns is not None and decided.source_columns != replay.source_columns:
        return "its source offsets differ (as its rows' source columns name them)"
    if decided.rows != replay.rows:
        return "its row count differs"
    if _digests_differ(decided, replay):
        return "its rows differ: as many, but the digest of the rows it wrote is another"
    if decided.source_end is not None and (decided.digest is None or replay.digest is None):
        return ("it was decided over source offsets recorded from Spark's offset log, which this run could not read "
                "back, and the rows' digest cannot stand in: its input cannot be proven the same")
    return None


def _digests_differ(decided: EpochInput, replay: EpochInput) -> bool:
    return decided.digest is not None and replay.digest is not None and decided.digest != replay.digest


def kafka_positions(epoch_input: EpochInput) -> tuple[tuple[Position, ...], tuple[Position, ...]] | None:
    """The micro-batch's (end, start) offsets per Kafka source partition, read from its offset log, when every source
    is a Kafka source (``kafka_eos``'s or Spark's: ``{"topic": {"partition": offset}}``); else None. A partition's
    start is the end of the micro-batch before, or for micro-batch 0 the origin ``kafka_eos`` records; unknown
    otherwise (then it is left out of ``start``)."""
    if epoch_input.source_end is None:
        return None
    ends: dict[tuple[str, int], int] = {}
    starts: dict[tuple[str, int], int] = {}
    for line in epoch_input.source_end:
        parsed = _kafka_offsets(line)
        if parsed is None:
            return None
        end, origin = parsed
        ends.update(end)
        starts.update(origin)
    for line in epoch_input.source_start or ():
        parsed = _kafka_offsets(line)
        if parsed is not None:
            starts.update(parsed[0])
    known_starts = {tp: o for tp, o in starts.items() if tp in ends}
    return (tuple((t, p, o) for (t, p), o in sorted(ends.items())),
            tuple((t, p, o) for (t, p), o in sorted(known_starts.items())))


def _kafka_offsets(line: str) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]] | None:
    """(offsets, origin) of one Kafka source's offset JSON, or None if it is not one."""
    try:
        body = json.loads(line)
    except ValueError:
        return None
    if not isinstance(body, dict) or not body:
        return None
    origin = body.pop(ORIGIN_KEY, {})
    body.pop(TOPIC_IDS_KEY, None)
    offsets = _per_partition(body)
    origins = _per_partition(origin) if isinstance(origin, dict) else None
    return None if offsets is None or not offsets else (offsets, origins or {})


def _per_partition(body: dict[str, object]) -> dict[tuple[str, int], int] | None:
    out: dict[tuple[str, int], int] = {}
    for topic, partitions in body.items():
        if not isinstance(partitions, dict):
            return None
        for partition, offset in partitions.items():
            if not isinstance(offset, int) or not str(partition).lstrip("-").isdigit():
                return None
            out[(topic, int(partition))] = offset
    return out


def describe_offsets(offsets: Sequence[tuple[str, int, int]]) -> str:
    """Source offsets (topic, partition, offset) for a message: the first five."""
    return ", ".join(f"{t}-{p}: {o}" for t, p, o in offsets[:5]) + (" ..." if len(offsets) > 5 else "")


def describe(epoch_input: EpochInput) -> str:
    """One line for error messages."""
    digest = f" (digest {epoch_input.digest})" if epoch_input.digest is not None else ""
    if epoch_input.source_end is None:
        if epoch_input.source_columns:
            return f"{epoch_input.rows} rows{digest}, up to source offsets {describe_offsets(epoch_input.source_columns)}"
        return f"{epoch_input.rows} rows{digest}"
    start = "; ".join(epoch_input.source_start or ()) or "the query's starting offsets"
    return f"{epoch_input.rows} rows, source offsets from {start} to {'; '.join(epoch_input.source_end)}{digest}"


def _normalised(line: str) -> str:
    try:
        return json.dumps(json.loads(line), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return line.strip()
