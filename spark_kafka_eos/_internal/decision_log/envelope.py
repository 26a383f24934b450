"""How one serialized decision-log record becomes Kafka records of bounded size, and back.

A record whose bytes fit in :data:`MAX_INLINE_BYTES` is written as it is, under the key ``<prefix>``
(the format every version of the log has used). A larger one (e.g. 400 tasks x 100 output partitions)
is compressed and split into chunk records under the keys ``<prefix>/chunk/<i>``, followed by a head
record under ``<prefix>`` whose value is a :class:`Manifest`: the chunks' offsets, the payload's size
and its SHA-256. Chunks and head are written in one transaction, so they commit or abort together.

Why compaction cannot separate or mix chunks of different decisions:

- The head points at its chunks by offset, and the reader checks each chunk's key and the payload's
  digest: a chunk of another decision is never taken for one of this decision.
- A chunk is removed by compaction only when a later *committed* record has the same key: the cleaner
  does not index aborted records, so an aborted decision's chunks supersede nothing. A later committed
  chunk of the prefix comes with a later committed head, so the chunks of the prefix's last head stay.
- ``/`` is not allowed in a prefix, so a chunk key is never the head key of another prefix.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from spark_kafka_eos.errors import KafkaEosDecisionLogError

MANIFEST_FORMAT = "kafka-eos-chunked-1"
MAX_INLINE_BYTES = 512 * 1024
"""Largest value written as one record. Kafka's defaults are ~1 MB per record (broker
``max.message.bytes``, librdkafka ``message.max.bytes``): half of that leaves room for keys and
batch headers, and for clusters that lowered the limit a little."""
CHUNK_BYTES = MAX_INLINE_BYTES


def head_key(prefix: str) -> bytes:
    """The key of a prefix's records in the log: compaction keeps the last one."""
    return prefix.encode()


def chunk_key(prefix: str, index: int) -> bytes:
    """The key of chunk ``index`` of a prefix's large record."""
    return f"{prefix}/chunk/{index}".encode()


def archive_key(prefix: str, index: int) -> bytes:
    """The key of archive ``index`` of a prefix's history (its oldest runs): unique, so compaction keeps it."""
    return f"{prefix}/archive/{index}".encode()


def announcement_key(prefix: str) -> bytes:
    """The key of a sweep's announcement on a prefix without records (compaction keeps the last one)."""
    return f"{prefix}/sweep/0".encode()


_DERIVED_KEY = re.compile(rb".+/(?:chunk|archive|sweep)/\d+")


def is_derived_key(key: bytes) -> bool:
    """True for a chunk's, an archive's or an announcement's key, which are not the head record of a prefix."""
    return _DERIVED_KEY.fullmatch(key) is not None


def is_chunk_of(prefix: str, key: bytes | None) -> bool:
    return key is not None and key.startswith(f"{prefix}/chunk/".encode())


def digest(value: bytes) -> str:
    return hashlib.sha256(value).hexdigest()


@dataclass(frozen=True)
class Manifest:
    """The head of a record written in chunks: where the chunks are and what they must add up to."""

    chunk_offsets: tuple[int, ...]
    size: int
    sha256: str

    def to_json(self) -> bytes:
        body = {"format": MANIFEST_FORMAT, "encoding": "zlib", "chunk_offsets": list(self.chunk_offsets),
                "size": self.size, "sha256": self.sha256}
        return json.dumps(body, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Split:
    """A large record, compressed and cut into chunk values; :meth:`manifest` once their offsets are known."""

    chunks: tuple[bytes, ...]
    size: int
    sha256: str

    def manifest(self, chunk_offsets: Sequence[int]) -> Manifest:
        if len(chunk_offsets) != len(self.chunks):
            raise ValueError(f"{len(self.chunks)} chunks, {len(chunk_offsets)} offsets")
        return Manifest(tuple(chunk_offsets), self.size, self.sha256)


def split(payload: bytes, chunk_bytes: int = CHUNK_BYTES) -> Split | None:
    """None when ``payload`` fits in one record; else its compressed chunks."""
    if len(payload) <= MAX_INLINE_BYTES:
        return None
    compressed = zlib.compress(payload, 6)
    chunks = tuple(compressed[i:i + chunk_bytes] for i in range(0, len(compressed), chunk_bytes))
    return Split(chunks, len(payload), digest(payload))


def parse_head(value: bytes) -> bytes | Manifest:
    """A head record's value: the record's own bytes, or the manifest of its chunks."""
    try:
        body = json.loads(value)
    except ValueError:
        return value  # not ours to judge here: LogRecord.from_json reports it
    if not isinstance(body, dict) or body.get("format") != MANIFEST_FORMAT:
        return value
    return Manifest(tuple(int(o) for o in body["chunk_offsets"]), int(body["size"]), str(body["sha256"]))


def join(prefix: str, manifest: Manifest, chunks: Mapping[int, tuple[bytes | None, bytes | None]]) -> bytes:
    """The record's bytes from its chunks (offset -> (key, value)), checked against the manifest."""
    parts = []
    for index, offset in enumerate(manifest.chunk_offsets):
        key, value = chunks.get(offset, (None, None))
        if key != chunk_key(prefix, index) or value is None:
            raise KafkaEosDecisionLogError(
                f"Chunk {index} of prefix {prefix}'s last decision-log record is missing at offset {offset} "
                f"(found key {key!r}). The log topic was altered outside spark-kafka-eos (records deleted, "
                "or the topic re-created); inspect it with: kafka-eos inspect."
            )
        parts.append(value)
    try:
        payload = zlib.decompress(b"".join(parts))
    except zlib.error as err:
        payload, problem = b"", str(err)
    else:
        problem = "digest mismatch"
    if len(payload) != manifest.size or digest(payload) != manifest.sha256:
        raise KafkaEosDecisionLogError(
            f"The chunks of prefix {prefix}'s last decision-log record at offsets {list(manifest.chunk_offsets)} "
            f"do not add up to the recorded payload ({problem}): the log topic was altered outside spark-kafka-eos."
        )
    return payload
