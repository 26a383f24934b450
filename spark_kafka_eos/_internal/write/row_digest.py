"""An order-independent digest of the rows an epoch writes: what proves a replay the same output.

Each row (its topic, partition, key, value and headers, as the sink writes them) is hashed with XXH3-128; the
digest is the sum of the rows' hashes modulo 2^128, so it does not depend on the rows' order nor on how they are
split into tasks and batches: tasks add theirs up, and so does the driver. The compiled extension computes
it in Rust (``native/src/row_digest.rs``, the same bytes); without it, Python does, row by row (with the xxhash
package). XXH3 is not a cryptographic hash: the digest proves a replay against accidents (re-planned input, changed
rows), not against someone who crafts rows to collide.

A row is hashed as its fields one after another: an absent field is ``0x00``; a byte string ``0x01``, its length in 8
big-endian bytes, its bytes; a partition ``0x01`` and 4 big-endian bytes (signed); the headers their count in 8
big-endian bytes, then each key and value as byte strings.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import xxhash

from spark_kafka_eos._internal.native.extension import native_module
from spark_kafka_eos._internal.write.input_schema import HEADERS, KEY, PARTITION, TOPIC, VALUE, InputColumns

_MODULUS = 1 << 128
_ABSENT = b"\x00"
_OFFSET_BYTES = (pa.binary(), pa.large_binary(), pa.string(), pa.large_string())


def add(*digests: int) -> int:
    """Digests of disjoint sets of rows, as one."""
    return sum(digests) % _MODULUS


def as_text(digest: int) -> str:
    return f"{digest:032x}"


def batch_digest(batch: pa.RecordBatch, columns: InputColumns, topic: str | None) -> int:
    """The digest of ``batch``'s rows, as the sink writes them (``topic``: the sink's topic option, else the rows')."""
    native = native_module()
    if native is not None and hasattr(native, "rows_digest"):
        return int(native.rows_digest(
            topic,
            _binary(batch.column(TOPIC)) if topic is None and columns.topic else None,
            _binary(batch.column(VALUE)),
            _binary(batch.column(KEY)) if columns.key else None,
            _int32(batch.column(PARTITION)) if columns.partition else None,
            batch.column(HEADERS).__arrow_c_array__() if columns.headers else None,
        ), 16)
    return python_digest(batch, columns, topic)


def python_digest(batch: pa.RecordBatch, columns: InputColumns, topic: str | None) -> int:
    """:func:`batch_digest` without the extension."""
    rows = batch.num_rows
    topics = batch.column(TOPIC).to_pylist() if topic is None and columns.topic else [topic] * rows
    keys = batch.column(KEY).to_pylist() if columns.key else [None] * rows
    partitions = batch.column(PARTITION).to_pylist() if columns.partition else [None] * rows
    headers = batch.column(HEADERS).to_pylist() if columns.headers else [None] * rows
    total = 0
    for row, value in enumerate(batch.column(VALUE).to_pylist()):
        total += row_hash(topics[row], partitions[row], keys[row], value, headers[row])
    return total % _MODULUS


def row_hash(topic: str | None, partition: int | None, key: object, value: object,
             headers: Iterable[dict[str, object]] | None) -> int:
    """One row's XXH3-128 (the module's docstring says of which bytes)."""
    fields = [_bytes(topic)]
    fields.append(_ABSENT if partition is None else b"\x01" + int(partition).to_bytes(4, "big", signed=True))
    fields += [_bytes(key), _bytes(value)]
    entries = list(headers or ())
    fields.append(len(entries).to_bytes(8, "big"))
    fields += _header_fields(entries)
    return xxhash.xxh3_128_intdigest(b"".join(fields))


def _header_fields(entries: Iterable[dict[str, object]]) -> list[bytes]:
    out = []
    for entry in entries:
        out += [_bytes(entry["key"]), _bytes(entry["value"])]
    return out


def _bytes(field: object) -> bytes:
    if field is None:
        return _ABSENT
    data = field.encode() if isinstance(field, str) else bytes(field)  # type: ignore[call-overload]
    return b"\x01" + len(data).to_bytes(8, "big") + data


def _binary(array: pa.Array) -> tuple[object, object]:
    if array.type not in _OFFSET_BYTES:
        array = array.cast(pa.large_binary())
    return array.__arrow_c_array__()


def _int32(array: pa.Array) -> tuple[object, object]:
    return (array if array.type == pa.int32() else array.cast(pa.int32())).__arrow_c_array__()
