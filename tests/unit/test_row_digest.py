"""The rows' digest: the same on the compiled path and without it, independent of order and batching, and another
for other rows (a changed value, key, header, topic or partition)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafka_eos._internal.native.extension import native_module
from spark_kafka_eos._internal.write.input_schema import InputColumns
from spark_kafka_eos._internal.write.row_digest import add, batch_digest, python_digest

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def batch(values: list[bytes | None], keys: list[bytes | None] | None = None, partitions: list[int | None] | None = None,
          topics: list[str] | None = None, headers: list[list[dict[str, object]] | None] | None = None) -> pa.RecordBatch:
    columns = {"value": pa.array(values, pa.binary())}
    if keys is not None:
        columns["key"] = pa.array(keys, pa.binary())
    if partitions is not None:
        columns["partition"] = pa.array(partitions, pa.int32())
    if topics is not None:
        columns["topic"] = pa.array(topics, pa.string())
    if headers is not None:
        columns["headers"] = pa.array(headers, HEADERS)
    return pa.RecordBatch.from_pydict(columns)


def digest(b: pa.RecordBatch, topic: str | None = "out") -> int:
    return batch_digest(b, InputColumns.of(b.schema.names), topic)


FULL = batch([b"v1", None, b"", b"v4"], keys=[b"k1", b"k2", None, b""], partitions=[0, 1, None, 2],
             topics=["a", "b", "c", "d"], headers=[[{"key": "h", "value": b"x"}], None, [], [{"key": "h", "value": None}]])


@pytest.mark.skipif(native_module() is None, reason="the compiled extension is not installed")
@pytest.mark.parametrize("topic", ["out", None])
def test_the_compiled_digest_is_the_python_one(topic: str | None) -> None:
    columns = InputColumns.of(FULL.schema.names)
    assert batch_digest(FULL, columns, topic) == python_digest(FULL, columns, topic)
    plain = batch([b"a", b"b"])
    assert batch_digest(plain, InputColumns.of(["value"]), "t") == python_digest(plain, InputColumns.of(["value"]), "t")


def test_order_and_batching_do_not_matter() -> None:
    whole = digest(batch([b"a", b"b", b"c"], keys=[b"1", b"2", b"3"]))
    assert digest(batch([b"c", b"a", b"b"], keys=[b"3", b"1", b"2"])) == whole
    assert add(digest(batch([b"a"], keys=[b"1"])), digest(batch([b"c", b"b"], keys=[b"3", b"2"]))) == whole


@pytest.mark.parametrize("other", [
    batch([b"v1", None, b"", b"v5"], keys=[b"k1", b"k2", None, b""], partitions=[0, 1, None, 2], topics=["a", "b", "c", "d"],
          headers=[[{"key": "h", "value": b"x"}], None, [], [{"key": "h", "value": None}]]),
    batch([b"v1", None, b"", b"v4"], keys=[b"k1", b"k2", b"", b""], partitions=[0, 1, None, 2], topics=["a", "b", "c", "d"],
          headers=[[{"key": "h", "value": b"x"}], None, [], [{"key": "h", "value": None}]]),
    batch([b"v1", None, b"", b"v4"], keys=[b"k1", b"k2", None, b""], partitions=[0, 1, 0, 2], topics=["a", "b", "c", "d"],
          headers=[[{"key": "h", "value": b"x"}], None, [], [{"key": "h", "value": None}]]),
    batch([b"v1", None, b"", b"v4"], keys=[b"k1", b"k2", None, b""], partitions=[0, 1, None, 2], topics=["a", "b", "c", "e"],
          headers=[[{"key": "h", "value": b"x"}], None, [], [{"key": "h", "value": None}]]),
    batch([b"v1", None, b"", b"v4"], keys=[b"k1", b"k2", None, b""], partitions=[0, 1, None, 2], topics=["a", "b", "c", "d"],
          headers=[[{"key": "h", "value": b"y"}], None, [], [{"key": "h", "value": None}]]),
], ids=["value", "key", "partition", "topic", "header"])
def test_other_rows_have_another_digest(other: pa.RecordBatch) -> None:
    assert digest(other, None) != digest(FULL, None)


def test_a_field_boundary_cannot_move() -> None:
    assert digest(batch([b"bc"], keys=[b"a"])) != digest(batch([b"c"], keys=[b"ab"]))
