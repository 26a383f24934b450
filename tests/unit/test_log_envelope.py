"""Chunking of large decision-log records (pure logic; the broker side is in tests/integration/write/test_decision_log.py)."""

from __future__ import annotations

import os

import pytest

from spark_kafka_eos._internal.decision_log.envelope import (
    MAX_INLINE_BYTES,
    Manifest,
    chunk_key,
    head_key,
    is_chunk_of,
    join,
    parse_head,
    split,
)
from spark_kafka_eos.errors import KafkaEosDecisionLogError

PREFIX = "orders-etl"


def chunk_records(prefix: str, chunks: tuple[bytes, ...], first_offset: int = 10) -> dict[int, tuple[bytes, bytes]]:
    """Chunks as the log holds them: offset -> (key, value), interleaved with other records' offsets."""
    return {first_offset + 2 * i: (chunk_key(prefix, i), c) for i, c in enumerate(chunks)}


def test_a_record_that_fits_is_written_as_it_is() -> None:
    payload = b'{"kind":"complete"}'
    assert split(payload) is None
    assert parse_head(payload) == payload


def test_a_large_record_is_cut_into_bounded_chunks_and_joined_back() -> None:
    payload = os.urandom(3 * MAX_INLINE_BYTES)  # incompressible: several chunks
    parts = split(payload)
    assert parts is not None and len(parts.chunks) >= 3
    assert all(len(c) <= MAX_INLINE_BYTES for c in parts.chunks)
    records = chunk_records(PREFIX, parts.chunks)
    manifest = parts.manifest(sorted(records))
    head = parse_head(manifest.to_json())
    assert head == manifest
    assert isinstance(head, Manifest) and join(PREFIX, head, records) == payload


def test_a_chunk_of_another_decision_is_never_joined() -> None:
    first = split(os.urandom(2 * MAX_INLINE_BYTES))
    second = split(os.urandom(2 * MAX_INLINE_BYTES))
    assert first is not None and second is not None
    records = chunk_records(PREFIX, first.chunks)
    manifest = first.manifest(sorted(records))
    # The same keys, other content (a later or aborted decision's chunk where this one's was).
    mixed = dict(records)
    offset = sorted(records)[1]
    mixed[offset] = (chunk_key(PREFIX, 1), second.chunks[1])
    with pytest.raises(KafkaEosDecisionLogError, match="do not add up"):
        join(PREFIX, manifest, mixed)
    missing = {o: r for o, r in records.items() if o != offset}
    with pytest.raises(KafkaEosDecisionLogError, match="Chunk 1 .* is missing"):
        join(PREFIX, manifest, missing)


def test_chunk_keys_never_collide_with_a_prefix_or_its_neighbours() -> None:
    # '/' is not allowed in a prefix, so no prefix's head key is a chunk key.
    assert b"/" not in head_key(PREFIX) and b"/" in chunk_key(PREFIX, 0)
    assert is_chunk_of(PREFIX, chunk_key(PREFIX, 3))
    assert not is_chunk_of(PREFIX, chunk_key(PREFIX + "-2", 0))
    assert not is_chunk_of(PREFIX, head_key(PREFIX))
