"""The decision log's record format (JSON, format 4) and epoch ids; records of format 1 are still read."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from spark_kafka_eos._internal.decision_log.records import (
    FORMAT_VERSION,
    EpochId,
    EpochInput,
    LogRecord,
    Participant,
    history_without,
    memory_after,
)
from spark_kafka_eos._internal.txn.session import PreparedTxnState
from spark_kafka_eos.errors import KafkaEosDecisionLogError

PARTICIPANT = Participant("p-0a1b2c3d-1-0-0", 4001, 7, 0, (("out", 0, 12), ("out", 2, 3)), ("out", 0, 40))


def full_record() -> LogRecord:
    return LogRecord("decision", "p", str(EpochId.stream("query-1", 5)), (PARTICIPANT, Participant("p-0a1b2c3d-1-1-0", 4002, 0, 1)),
                     "sink-group", (("in", 0, 100), ("in", 1, 7)), 1_700_000_000_000)


def test_a_record_round_trips_through_its_json() -> None:
    record = full_record()
    assert LogRecord.from_json(record.to_json()) == record
    reset = LogRecord("reset", "p", "reset:1700000000000", written_at_ms=1, previous_epoch_id=record.epoch_id)
    assert LogRecord.from_json(reset.to_json()) == reset


def test_the_json_carries_the_format_and_every_field() -> None:
    body = json.loads(full_record().to_json())
    assert body["format"] == FORMAT_VERSION == 4
    assert (body["kind"], body["prefix"], body["epoch_id"]) == ("decision", "p", "stream:query-1:5")
    assert body["participants"][0] == {"transactional_id": "p-0a1b2c3d-1-0-0", "producer_id": 4001, "epoch": 7,
                                       "spark_partition": 0, "records": [["out", 0, 12], ["out", 2, 3]], "probe": ["out", 0, 40],
                                       "probe_digest": None}
    assert (body["consumer_group"], body["offsets"], body["written_at_ms"]) == ("sink-group", [["in", 0, 100], ["in", 1, 7]], 1_700_000_000_000)
    assert body["previous_epoch_id"] is None
    assert body["history"] == []
    assert (body["input"], body["batch_inputs"]) == (None, [])


def test_a_sweeps_announced_aborts_round_trip_name_exact_instances_and_are_left_out_of_other_records() -> None:
    record = full_record()
    assert "aborting" not in json.loads(record.to_json())
    proof = replace(record.completed(), aborting=(("p-0a1b2c3d-2-0-0", 4003, 1),))
    assert LogRecord.from_json(proof.to_json()) == proof
    assert proof.announced_aborts([PreparedTxnState("p-0a1b2c3d-2-0-0", 4003, 1), PARTICIPANT.txn]) == \
        [PreparedTxnState("p-0a1b2c3d-2-0-0", 4003, 1)]
    assert proof.announced_aborts([PreparedTxnState("p-0a1b2c3d-2-0-0", 4003, 2)]) == []  # re-initialised since
    assert proof.completed().aborting == ()


def test_an_epochs_input_round_trips_and_rides_along_in_its_completion() -> None:
    """Format 4: what the epoch consumed (rows; a stream's offset log lines for it and the batch before)."""
    decided = EpochInput(200, ('{"in":{"0":200}}',), ('{"in":{"0":100}}',))
    record = LogRecord("decision", "p", str(EpochId.stream("q", 1)), (PARTICIPANT,), input=decided,
                       batch_inputs=(("batch:w1", 50),))
    assert LogRecord.from_json(record.to_json()) == record
    assert record.completed().input == decided and record.completed().batch_inputs == (("batch:w1", 50),)
    unreadable = LogRecord("decision", "p", "batch:w2", input=EpochInput(7))
    assert LogRecord.from_json(unreadable.to_json()).input == EpochInput(7, None, None)
    assert unreadable.batch_input_rows(EpochId.batch("w2")) == 7 and record.batch_input_rows(EpochId.batch("w1")) == 50
    assert record.batch_input_rows(EpochId.batch("w3")) is None


def test_a_record_of_format_3_is_read_without_an_input() -> None:
    body = json.loads(full_record().to_json())
    body["format"] = 3
    del body["input"], body["batch_inputs"]
    assert LogRecord.from_json(json.dumps(body).encode()) == full_record()


def test_a_batch_jobs_input_rows_are_remembered_in_later_records() -> None:
    last = LogRecord("complete", "p", "batch:w1", batch_inputs=(("batch:w0", 3), ("batch:w1", 5)))
    carried = memory_after(last, batch_input=("batch:w1", 6))["batch_inputs"]
    assert carried == (("batch:w0", 3), ("batch:w1", 6))
    assert memory_after(last)["batch_inputs"] == last.batch_inputs


def test_a_record_of_format_1_is_still_read() -> None:
    """Format 1 (before epoch identity): epoch ids ``stream:<batch>``, no probe, no previous epoch."""
    raw = json.dumps({
        "kind": "decision", "prefix": "p", "epoch_id": "stream:12", "format": 1, "consumer_group": None,
        "participants": [{"transactional_id": "p-3-0", "producer_id": 9, "epoch": 2, "spark_partition": 3,
                          "records": [["out", 1, 5]]}],
        "offsets": [], "written_at_ms": 1_600_000_000_000,
    }).encode()
    record = LogRecord.from_json(raw)
    assert record.participants == (Participant("p-3-0", 9, 2, 3, (("out", 1, 5),), None),)
    assert record.epoch == EpochId("stream", "", 12) and record.batch_id == 12
    assert "older version" in record.epoch.describe()
    batch = LogRecord.from_json(raw.replace(b'"stream:12"', b'"batch:w1"').replace(b'"decision"', b'"complete"'))
    assert (batch.kind, batch.epoch, batch.batch_id) == ("complete", EpochId.batch("w1"), None)


@pytest.mark.parametrize("format_version", [None, 0, 5, "2"])
def test_a_record_of_an_unknown_format_is_refused(format_version: object) -> None:
    body = json.loads(full_record().to_json())
    body["format"] = format_version
    with pytest.raises(KafkaEosDecisionLogError, match="Upgrade spark-kafka-eos"):
        LogRecord.from_json(json.dumps(body).encode())


@pytest.mark.parametrize("epoch", [EpochId.stream("q", 0), EpochId.stream("q:with:colons", 41), EpochId.batch("2024-01-01"),
                                   EpochId("reset", "1700000000000")])
def test_epoch_ids_round_trip_through_their_text(epoch: EpochId) -> None:
    assert EpochId.parse(str(epoch)) == epoch


def test_an_unknown_epoch_kind_is_refused() -> None:
    with pytest.raises(KafkaEosDecisionLogError, match="unknown epoch id"):
        EpochId.parse("micro:3")


def test_completion_keeps_the_epoch_and_offsets_and_drops_the_participants() -> None:
    completed = full_record().completed()
    assert (completed.kind, completed.epoch_id, completed.participants) == ("complete", "stream:query-1:5", ())
    assert (completed.consumer_group, completed.offsets) == ("sink-group", (("in", 0, 100), ("in", 1, 7)))


def test_a_participant_names_its_transaction_and_its_output() -> None:
    assert PARTICIPANT.txn == PreparedTxnState("p-0a1b2c3d-1-0-0", 4001, 7)
    assert PARTICIPANT.describe_output() == "out-0: 12 records, out-2: 3 records"
    assert Participant("x", 1, 0, 0).describe_output() == "no records"


def test_the_history_round_trips_and_remembers_each_run_once_newest_last() -> None:
    from spark_kafka_eos._internal.decision_log.records import ARCHIVE_BATCH, HISTORY_LIMIT, archive_overflow, history_with

    d1 = LogRecord("complete", "p", "batch:d1", history=history_with(None, EpochId.batch("d1"), 1))
    stream = LogRecord("complete", "p", "stream:q:4", history=history_with(d1, EpochId.stream("q", 4), 2))
    again = LogRecord("complete", "p", "stream:q:5", history=history_with(stream, EpochId.stream("q", 5), 3))
    assert again.history == (("batch:d1", 1), ("stream:q:5", 3))
    assert LogRecord.from_json(again.to_json()) == again
    assert again.last_decided(EpochId.batch("d1")) == EpochId.batch("d1")
    assert again.last_decided(EpochId.stream("q", 9)) == EpochId.stream("q", 5)
    assert again.last_decided(EpochId.batch("d2")) is None
    # Past the limit, the log archives the oldest ARCHIVE_BATCH runs (archive_overflow) before the history grows further.
    many = None
    for day in range(HISTORY_LIMIT + ARCHIVE_BATCH - 1):
        many = LogRecord("complete", "p", f"batch:d{day}", history=history_with(many, EpochId.batch(f"d{day}"), day))
    assert many is not None and archive_overflow(many.history) is None
    full = history_with(many, EpochId.batch("last"), 0)
    overflow = archive_overflow(full)
    assert overflow is not None and len(full) == HISTORY_LIMIT + ARCHIVE_BATCH
    archived, kept = overflow
    assert archived[0][0] == "batch:d0" and len(archived) == ARCHIVE_BATCH and len(kept) == HISTORY_LIMIT and kept[-1][0] == "batch:last"


def test_group_positions_and_partly_lost_epochs_round_trip_and_ride_along_in_every_record() -> None:
    first = LogRecord("decision", "p", "batch:w1", consumer_group="g", offsets=(("in", 0, 100), ("in", 1, 7)),
                      **memory_after(None, "g", (("in", 0, 100), ("in", 1, 7))))  # type: ignore[arg-type]
    assert first.group_position("g") == {("in", 0): 100, ("in", 1): 7}
    assert LogRecord.from_json(first.to_json()) == first
    # A later decision moves one partition of g; one of another group leaves g's alone; completion keeps both.
    later = LogRecord("decision", "p", "batch:w2", **memory_after(first.completed(), "g", (("in", 1, 9),)))  # type: ignore[arg-type]
    other = LogRecord("decision", "p", "batch:w3", **memory_after(later, "h", (("x", 0, 1),)))  # type: ignore[arg-type]
    assert other.completed().group_position("g") == {("in", 0): 100, ("in", 1): 9}
    assert other.group_position("h") == {("x", 0): 1}
    lost = LogRecord("reset", "p", "reset:1", partly_lost=("batch:w1",))
    assert LogRecord.from_json(lost.to_json()) == lost
    assert LogRecord("complete", "p", "batch:w4", **memory_after(lost)).partly_lost == ("batch:w1",)  # type: ignore[arg-type]


def test_a_forgotten_epoch_leaves_the_history_as_if_never_decided() -> None:
    last = LogRecord("decision", "p", "batch:w2", history=(("batch:w1", 1), ("stream:q:4", 2), ("batch:w2", 3)))
    assert history_without(last, EpochId.batch("w2")) == (("batch:w1", 1), ("stream:q:4", 2))
    assert history_without(last, EpochId.stream("q", 4)) == (("batch:w1", 1), ("stream:q:3", 2), ("batch:w2", 3))
    assert history_without(LogRecord("decision", "p", "stream:q:0"), EpochId.stream("q", 0)) == ()
