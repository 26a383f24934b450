"""The worker's heap is frozen once per process and again after new imports, only in pyspark's workers for the
driver's calls, and thawed when a task turns the option off."""

from __future__ import annotations

import gc
import importlib.machinery
import sys
import types

import pytest

from spark_kafka_eos._internal import worker_gc
from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.config.writer import parse_writer_options
from spark_kafka_eos.errors import KafkaEosOptionError


def _count_freezes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    freezes: list[int] = []
    real_freeze = gc.freeze

    def counted() -> None:
        freezes.append(1)
        real_freeze()

    monkeypatch.setattr(gc, "freeze", counted)
    return freezes


def test_a_freeze_happens_once_per_process_and_is_undone_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_gc, "_frozen_in_pid", None)
    freezes = _count_freezes(monkeypatch)
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
            parse({**options, "gcfreeze": "sometimes"}, streaming=False)


def test_a_worker_that_imported_modules_since_its_freeze_freezes_again_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyspark imports pandas during a worker's first task, after that task's freeze: the next task freezes it."""
    monkeypatch.setattr(worker_gc, "_frozen_in_pid", None)
    freezes = _count_freezes(monkeypatch)
    try:
        worker_gc.freeze_worker_heap(True)
        monkeypatch.setitem(sys.modules, "imported_during_the_first_task", types.ModuleType("imported_during_the_first_task"))
        worker_gc.freeze_worker_heap(True)
        worker_gc.freeze_worker_heap(True)
        assert len(freezes) == 2
    finally:
        gc.unfreeze()


@pytest.mark.parametrize(("main_module", "frozen"), [("pyspark.daemon", True), ("pytest", False)])
def test_a_drivers_call_freezes_only_inside_a_worker_forked_by_pysparks_daemon(
        monkeypatch: pytest.MonkeyPatch, main_module: str, frozen: bool) -> None:
    """The schema, planning and commit calls run in pyspark's workers; made in a user's own process, they leave
    its collector alone."""
    monkeypatch.setattr(worker_gc, "_frozen_in_pid", None)
    main = types.ModuleType("__main__")
    main.__spec__ = importlib.machinery.ModuleSpec(main_module, None)
    monkeypatch.setitem(sys.modules, "__main__", main)
    gc.unfreeze()
    try:
        worker_gc.freeze_driver_call_heap(True)
        assert (gc.get_freeze_count() > 0) is frozen
    finally:
        gc.unfreeze()
