"""Exactly-once against the operator's calendar: what happens over days, not in one run. Old backfill
dates re-run, a checkpoint path spelt another way, a deleted decision log, two jobs on one consumer group,
a resume from the group after a crash. Each ends with every row exactly once, or with a loud error before
anything is visible, counted by an independent read_committed consumer."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from tests.harness.kafka import KafkaTestCluster
from tests.harness.pipeline import open_transactions
from tests.integration.test_epoch_identity import batch_write, expected, produce, reset, stream, values

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def rows(spark: SparkSession, tag: str, count: int = 100):  # type: ignore[no-untyped-def]
    return spark.range(count).selectExpr(f"CONCAT('{tag}-', CAST(id AS STRING)) AS value").repartition(2)


def tagged(tag: str, count: int = 100) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(count)]


def test_an_old_backfill_date_re_run_writes_nothing_however_many_jobs_and_resets_came_since(
        spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """The reported duplicate, as an orchestrator runs it: d1, d2, then d1 again (a cleared task), then d2."""
    sink, prefix = kafka.create_topic(2, "sink"), f"daily-{uuid.uuid4().hex[:6]}"
    for day in ("d1", "d2", "d1", "d2"):
        batch_write(rows(spark, day), kafka, sink, prefix, writeId=f"daily-{day}")
    assert values(kafka, sink) == sorted(tagged("d1") + tagged("d2"))

    reset(kafka, prefix)  # an operator hands the prefix over: its history stays
    batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="daily-d1")
    batch_write(rows(spark, "d3"), kafka, sink, prefix, writeId="daily-d3")
    assert values(kafka, sink) == sorted(tagged("d1") + tagged("d2") + tagged("d3"))
    assert open_transactions(kafka, prefix) == []


def _forget_last_commit(checkpoint: Path) -> int:
    """As after a driver killed between the sink's decision and Spark's commit log: Spark replays it."""
    last = max(int(f.name) for f in (checkpoint / "commits").iterdir() if f.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    return last


def test_a_checkpoint_path_spelt_differently_keeps_its_prefix_and_a_replay_is_recognised(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """The same checkpoint reached through a link (as ``dbfs:/Volumes/x`` and ``/Volumes/x``, or ``s3a://``
    and ``s3://``, name one directory): the derived prefix is the same, so Spark's replay of a decided
    micro-batch is recognised instead of written again under a new, empty prefix."""
    source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    real = tmp_path / "volumes" / "checkpoint"
    real.parent.mkdir()
    os.symlink(tmp_path / "volumes", tmp_path / "mounted")
    first = produce(kafka, source, 40, "first")
    stream(spark, kafka, source, sink, real, prefix=None)  # micro-batches 0 and 1
    assert _forget_last_commit(real) == 1
    later = produce(kafka, source, 20, "later")
    stream(spark, kafka, source, sink, tmp_path / "mounted" / "checkpoint", prefix=None)  # replays 1, then 2
    assert values(kafka, sink) == expected(first, later)


def test_a_query_moved_to_a_prefix_without_its_history_is_refused_before_anything_is_visible(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """A restarted query past micro-batch 0 whose prefix has no record of it (its checkpoint path derived
    another prefix, or transactional.id.prefix changed) cannot tell a replay from a new batch: refused,
    naming the fix, unless the operator opts in."""
    source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    checkpoint = tmp_path / "checkpoint"
    first = produce(kafka, source, 40, "first")
    stream(spark, kafka, source, sink, checkpoint, prefix=f"old-{uuid.uuid4().hex[:6]}")
    _forget_last_commit(checkpoint)
    new_prefix = f"new-{uuid.uuid4().hex[:6]}"
    with pytest.raises(StreamingQueryException, match=f"'{new_prefix}' has no record of streaming query .* micro-batch 1.*allowNewPrefix"):
        stream(spark, kafka, source, sink, checkpoint, prefix=new_prefix)
    assert values(kafka, sink) == expected(first)
    assert open_transactions(kafka, new_prefix) == []


def test_a_deleted_decision_log_is_an_error_not_a_fresh_start(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """The log topic is deleted (or re-created, or decisionLogTopic renamed) while a query's checkpoint
    still holds a decided micro-batch Spark will replay: refused, loudly, and nothing is written twice."""
    source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    decision_log, prefix = f"decisions-{uuid.uuid4().hex[:6]}", f"orders-{uuid.uuid4().hex[:6]}"
    checkpoint = tmp_path / "checkpoint"
    first = produce(kafka, source, 40, "first")
    stream(spark, kafka, source, sink, checkpoint, prefix, decisionLogTopic=decision_log)
    _forget_last_commit(checkpoint)
    kafka.delete_topic(decision_log)
    with pytest.raises(StreamingQueryException, match=f"'{decision_log}' .*has no record of transactional.id.prefix '{prefix}'.*kafka-eos reset"):
        stream(spark, kafka, source, sink, checkpoint, prefix, decisionLogTopic=decision_log)
    with pytest.raises(StreamingQueryException, match=f"has no record of transactional.id.prefix '{prefix}'"):
        stream(spark, kafka, source, sink, checkpoint, prefix, decisionLogTopic=f"renamed-{decision_log}")
    assert values(kafka, sink) == expected(first)
    assert open_transactions(kafka, prefix) == []
