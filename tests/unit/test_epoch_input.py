"""What an epoch consumed (Spark's offset log, row counts) and when a replay is the same input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_kafka_eos._internal.decision_log.records import EpochInput
from spark_kafka_eos._internal.write.epoch_input import input_difference, kafka_positions, read_offset_log, stream_input
from spark_kafka_eos._internal.write.spark_checkpoint import checkpoint_of_session, names_query

META = '{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{"spark.sql.shuffle.partitions":"200"}}'


def offset_log(checkpoint: Path, batch: int, *sources: str, timestamp: int = 1700000000000) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    meta = META.replace("1700000000000", str(timestamp))
    (checkpoint / "offsets" / str(batch)).write_text("\n".join(["v1", meta, *sources]))


def test_the_source_lines_are_read_normalised_and_the_metadata_is_not(tmp_path: Path) -> None:
    offset_log(tmp_path, 3, '{"in": {"1": 20, "0": 10}}', "-")
    assert read_offset_log(str(tmp_path), 3) == ('{"in":{"0":10,"1":20}}', "-")
    assert read_offset_log(f"file://{tmp_path}", 3) == read_offset_log(str(tmp_path) + "/", 3)
    assert read_offset_log(str(tmp_path), 4) is None  # missing: unknown, not empty


def test_a_micro_batch_is_known_by_its_offsets_and_the_batch_befores(tmp_path: Path) -> None:
    offset_log(tmp_path, 0, '{"in":{"0":100}}')
    offset_log(tmp_path, 1, '{"in":{"0":200}}')
    assert stream_input(str(tmp_path), 0, 100) == EpochInput(100, ('{"in":{"0":100}}',), ())
    assert stream_input(str(tmp_path), 1, 100) == EpochInput(100, ('{"in":{"0":200}}',), ('{"in":{"0":100}}',))
    assert stream_input(None, 1, 7) == EpochInput(7)
    assert stream_input(str(tmp_path / "elsewhere"), 1, 7) == EpochInput(7)


def test_a_replay_is_the_same_input_only_with_the_same_offsets_or_without_them_the_same_rows() -> None:
    decided = EpochInput(100, ('{"in":{"0":100}}',), ())
    assert input_difference(decided, decided) is None
    assert input_difference(decided, EpochInput(90, decided.source_end, ())) is None  # not a function of its input: warned
    assert input_difference(decided, EpochInput(200, ('{"in":{"0":200}}',), ())) == "its source offsets differ"
    assert input_difference(decided, EpochInput(100, ('{"in":{"0":100}}',), ('{"in":{"0":50}}',))) == "its source offsets differ"
    assert "could not read" in (input_difference(decided, EpochInput(100)) or "")
    assert input_difference(EpochInput(100), EpochInput(100)) is None
    assert input_difference(EpochInput(100), EpochInput(200, decided.source_end, ())) == "its row count differs"


def test_kafka_positions_come_from_every_kafka_source_and_the_recorded_origin() -> None:
    first = EpochInput(5, ('{"@origin":{"a":{"0":3}},"a":{"0":9,"1":4}}',), ())
    assert kafka_positions(first) == ((("a", 0, 9), ("a", 1, 4)), (("a", 0, 3),))
    later = EpochInput(5, ('{"a":{"0":12}}', '{"b":{"2":1}}'), ('{"a":{"0":9}}', '{"b":{"2":0}}'))
    assert kafka_positions(later) == ((("a", 0, 12), ("b", 2, 1)), (("a", 0, 9), ("b", 2, 0)))
    assert kafka_positions(EpochInput(5)) is None
    assert kafka_positions(EpochInput(5, ('{"a":{"0":12}}', '{"logOffset":3}'), ())) is None  # a file source beside it
    assert kafka_positions(EpochInput(5, ("-",), ())) is None


def test_without_offsets_on_both_sides_the_digest_proves_the_rows() -> None:
    decided = EpochInput(100, digest="a" * 32)
    assert input_difference(decided, EpochInput(100, digest="a" * 32)) is None
    assert input_difference(decided, EpochInput(100, digest="b" * 32)) == (
        "its rows differ: as many, but the digest of the rows it wrote is another")
    assert input_difference(EpochInput(100), EpochInput(100, digest="b" * 32)) is None  # a decision of an older version
    # Decided over offsets this run cannot read: the digest stands in, or the input cannot be proven.
    with_offsets = EpochInput(100, ('{"in":{"0":100}}',), (), digest="a" * 32)
    assert input_difference(with_offsets, EpochInput(100, digest="a" * 32)) is None
    assert "cannot be proven the same" in (input_difference(with_offsets, EpochInput(100)) or "")
    assert input_difference(with_offsets, EpochInput(100, digest="b" * 32)) is not None
    # Over equal offsets, other rows only mean the query is not a function of its input: the decided output stands.
    assert input_difference(with_offsets, EpochInput(90, ('{"in":{"0":100}}',), (), digest="b" * 32)) is None


def _checkpoint(tmp_path: Path, name: str, query_id: str) -> str:
    (tmp_path / name).mkdir()
    (tmp_path / name / "metadata").write_text(json.dumps({"id": query_id}))
    return str(tmp_path)


def test_the_sessions_checkpoint_is_its_root_and_the_querys_name_once_its_metadata_names_the_query(tmp_path: Path) -> None:
    root = _checkpoint(tmp_path, "orders", "q-1")
    described = "orders\nid = q-1\nrunId = r-9\nbatch = 4"
    assert checkpoint_of_session(root + "/", described, "q-1") == f"{root}/orders"
    assert names_query(f"{root}/orders", "q-1")


@pytest.mark.parametrize(("described", "query_id"), [
    ("\nid = q-1\nrunId = r-9\nbatch = 4", "q-1"),  # a query without a name: Spark checkpoints it under a random one
    ("orders\nid = q-2\nrunId = r-9\nbatch = 4", "q-1"),  # the job description names another query
    ("a description the user set", "q-1"),
    (None, "q-1"),
])
def test_no_sessions_checkpoint_without_a_query_name_that_matches(tmp_path: Path, described: str | None, query_id: str) -> None:
    root = _checkpoint(tmp_path, "orders", "q-1")
    assert checkpoint_of_session(root, described, query_id) is None


def test_a_checkpoint_whose_metadata_names_another_query_is_not_taken(tmp_path: Path) -> None:
    root = _checkpoint(tmp_path, "orders", "another-query")
    assert checkpoint_of_session(root, "orders\nid = q-1\nrunId = r\nbatch = 0", "q-1") == f"{root}/orders"
    assert not names_query(f"{root}/orders", "q-1")
    assert not names_query(f"{root}/nothing-here", "q-1")
    assert checkpoint_of_session(None, "orders\nid = q-1\nrunId = r\nbatch = 0", "q-1") is None
