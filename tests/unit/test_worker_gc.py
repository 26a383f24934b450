"""The worker's heap is frozen once per process, and thawed when a task turns the option off."""

from __future__ import annotations

import gc

import pytest

from spark_kafka_eos import worker_gc
from spark_kafka_eos.config.reader import parse_reader_options
from spark_kafka_eos.config.writer import parse_writer_options
from spark_kafka_eos.errors import KafkaEosOptionError


def test_a_freeze_happens_once_per_process_and_is_undone_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_gc, "_frozen_in_pid", None)
    freezes: list[int] = []
    monkeypatch.setattr(gc, "freeze", lambda freeze=gc.freeze: freezes.append(1) or freeze())
    gc.unfreeze()  # something that ran before in this pytest process may have frozen it (149k objects were, in one run)
    try:
        worker_gc.freeze_worker_heap(True)
        assert gc.get_freeze_count() > 0 and len(freezes) == 1
        worker_gc.freeze_worker_heap(True)
        assert len(freezes) == 1  # the second task of the worker: no second collection and freeze
        worker_gc.freeze_worker_heap(False)
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()


def test_a_worker_forked_after_a_freeze_freezes_its_own_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyspark's daemon forks the workers: a pid other than the one that froze freezes again."""
    monkeypatch.setattr(worker_gc, "_frozen_in_pid", -1)
    try:
        worker_gc.freeze_worker_heap(True)
        assert gc.get_freeze_count() > 0
        monkeypatch.setattr(worker_gc, "_frozen_in_pid", -1)
        worker_gc.freeze_worker_heap(False)  # another process's freeze: not this one's to undo
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_the_option_is_on_by_default_and_refuses_what_is_not_a_boolean() -> None:
    reader = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}
    writer = {"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "t", "transactional.id.prefix": "p"}
    assert parse_reader_options(reader, streaming=False).gc_freeze
    assert parse_writer_options(writer, streaming=False).gc_freeze
    assert not parse_reader_options({**reader, "gcfreeze": "false"}, streaming=False).gc_freeze
    assert not parse_writer_options({**writer, "gcfreeze": "FALSE"}, streaming=False).gc_freeze
    for parse, options in ((parse_reader_options, reader), (parse_writer_options, writer)):
        with pytest.raises(KafkaEosOptionError, match="gcFreeze"):
            parse({**options, "gcfreeze": "sometimes"}, streaming=False)  # type: ignore[operator]
