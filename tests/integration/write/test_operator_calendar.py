"""Exactly-once against the operator's calendar: what happens over days, not in one run. Old backfill
dates re-run, a checkpoint path spelt another way, a deleted decision log, two jobs on one consumer group,
a resume from the group after a crash. Each ends with every row exactly once, or with a loud error before
anything is visible, counted by an independent read_committed consumer."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from spark_kafka_eos._internal.cluster import cached_session
from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.config.writer import WRITE_ENGINE_VARIABLE, WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord
from spark_kafka_eos._internal.txn.session import TransactionSession
from spark_kafka_eos._internal.write.commit_message import TaskCommit
from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
from spark_kafka_eos._internal.write.hooks import NO_HOOKS, WriterHooks
from spark_kafka_eos._internal.write.task_producer import TaskIdentity, write_task
from spark_kafka_eos.cli import main as cli
from spark_kafka_eos.errors import KafkaEosEpochAbortedError, KafkaEosEpochCommittedError
from tests.harness.kafka import KafkaRecord, KafkaTestCluster, OpenTransaction, Sent
from tests.harness.pipeline import open_transactions
from tests.integration.write.test_epoch_identity import batch_write, expected, produce, reset, stream, values

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

    # The operator acknowledges the fresh start (the command the error names); a new query may then begin.
    assert cli(["reset", "--bootstrap-servers", kafka.bootstrap_servers, "--prefix", prefix,
                "--decision-log-topic", decision_log, "--yes"]) == 0
    stream(spark, kafka, source, sink, tmp_path / "new-checkpoint", prefix, decisionLogTopic=decision_log)
    assert values(kafka, sink) == expected(first, first)  # a new query, started over from the earliest offset, as asked


class DriverKilled(BaseException):
    """Stands for the driver's process dying: nothing of the coordinator runs after it."""


class DieAt(WriterHooks):
    """The driver dies at hook point ``point``."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.fired = False

    def at(self, point: str, session: object, decision: LogRecord) -> None:  # type: ignore[override]
        if point == self.point:
            self.fired = True
            raise DriverKilled(decision.epoch_id)


class DieAfterDecision(DieAt):
    """The driver dies between the decision (group offsets moved) and phase 2 (participants committed)."""

    def __init__(self) -> None:
        super().__init__("after_decision")


def copy_range(kafka: KafkaTestCluster, source: list[KafkaRecord], sink: str, prefix: str, group: str, write_id: str,
               hooks: WriterHooks = NO_HOOKS) -> None:
    """One epoch of a copy job with its own coordinator (no Spark): the records, with their source positions."""
    batch = pa.record_batch(
        [pa.array([r.value for r in source], pa.binary()), pa.array([r.topic for r in source], pa.string()),
         pa.array([r.partition for r in source], pa.int32()), pa.array([r.offset for r in source], pa.int64())],
        names=["value", "source_topic", "source_partition", "source_offset"])
    options = parse_writer_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": sink,
                                    "transactional.id.prefix": prefix, "consumerGroup": group}, streaming=False)
    epoch = EpochId.batch(write_id)
    tasks = [write_task(options, epoch, [batch], task=TaskIdentity(0, 0, 0), transaction_timeout_ms=60_000)]
    TwoPhaseCommitCoordinator(options, 60_000, hooks).commit(epoch, tasks)


def backfill_from_group(spark: SparkSession, kafka: KafkaTestCluster, source: str, sink: str, prefix: str, group: str,
                        starting: str = "group") -> None:
    (spark.read.format("kafka_eos").option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("subscribe", source)
     .option("startingOffsets", starting).option("consumerGroup", group).load()
     .selectExpr("value", "topic AS source_topic", "partition AS source_partition", "offset AS source_offset")
     .write.format("kafka_eos").mode("append").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
     .option("topic", sink).option("transactional.id.prefix", prefix).option("consumerGroup", group).save())


def test_a_resume_from_the_group_after_a_driver_crash_rolls_the_decision_that_moved_it_forward(
        spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """The reported loss (200 of 600): the group moved with a decision whose driver died before phase 2;
    a batch job of another prefix resumes from the group. It must make those records visible first."""
    source, sink, group = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink"), f"etl-{uuid.uuid4().hex[:6]}"
    sent = produce(kafka, source, 600, "r")
    records = kafka.read_committed(source)
    first = f"first-{uuid.uuid4().hex[:6]}"
    copy_range(kafka, records[:200], sink, first, group, "part-1")
    crash = DieAfterDecision()
    with pytest.raises(DriverKilled):
        copy_range(kafka, records[200:400], sink, first, group, "part-2", crash)
    assert crash.fired and kafka.group_offsets(group, source) == {0: 400}
    assert len(open_transactions(kafka, first)) == 1  # the decided participant, not yet committed

    backfill_from_group(spark, kafka, source, sink, f"second-{uuid.uuid4().hex[:6]}", group)
    assert values(kafka, sink) == expected(sent)
    assert kafka.group_offsets(group, source) == {0: 600}
    assert open_transactions(kafka, first) == []


def test_two_writers_on_one_consumer_group_never_commit_the_same_range(
        spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """Two backfills that both planned from the group (or two prefixes on one group): the second to decide
    finds the group already past what it read, and is refused with nothing visible."""
    source, sink, group = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink"), f"etl-{uuid.uuid4().hex[:6]}"
    sent = produce(kafka, source, 200, "r")
    backfill_from_group(spark, kafka, source, sink, f"one-{uuid.uuid4().hex[:6]}", group)
    second = f"two-{uuid.uuid4().hex[:6]}"
    with pytest.raises(Exception, match=f"consumerGroup '{group}' already stands past records this epoch consumed.*{source}-0: from 0, the group at 200"):
        backfill_from_group(spark, kafka, source, sink, second, group, starting="earliest")  # planned before the first decided
    assert values(kafka, sink) == expected(sent)
    assert kafka.group_offsets(group, source) == {0: 200}
    assert open_transactions(kafka, second) == []


def sink_options(kafka: KafkaTestCluster, sink: str, prefix: str, **extra: str) -> WriterOptions:
    return parse_writer_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": sink,
                                 "transactional.id.prefix": prefix, **extra}, streaming=True)


def prepared(options: WriterOptions, epoch: EpochId, values_: list[bytes], partitions: int = 2) -> list[TaskCommit]:
    batch = pa.record_batch([pa.array(values_, pa.binary())], names=["value"])
    return [write_task(options, epoch, [batch], task=TaskIdentity(p, 0, p), transaction_timeout_ms=60_000) for p in range(partitions)]


class PausedDecisionLog(KafkaDecisionLog):
    """A decision log whose decision, once written and before its commit, lets ``while_open`` run."""

    def __init__(self, options: WriterOptions, while_open: Callable[[], None]) -> None:
        super().__init__(options)
        self._while_open = while_open

    def append(self, record: LogRecord, group_offsets: Mapping[tuple[str, int], int] | None = None,
               before_commit: Callable[[], None] | None = None, commit_by: float | None = None) -> None:
        def paused() -> None:
            if before_commit is not None:
                before_commit()
            if record.kind == "decision":
                self._while_open()
        super().append(record, group_offsets, paused, commit_by)


def test_a_second_querys_planning_never_aborts_the_owners_decision_in_flight(kafka: KafkaTestCluster) -> None:
    """A misconfigured second query on the owner's prefix is planned while the owner's decision is written
    but not committed. Its planning must not fence the owner's decision away (the owner's query would die)."""
    sink, prefix = kafka.create_topic(2, "sink"), f"owner-{uuid.uuid4().hex[:6]}"
    options = sink_options(kafka, sink, prefix)
    order: list[str] = []
    second_query = threading.Thread(target=lambda: (TwoPhaseCommitCoordinator(options, 60_000).prepare(), order.append("planned")))

    def second_query_plans() -> None:
        second_query.start()
        time.sleep(2)  # the second query's planning runs now, while the decision is open
        order.append("decision still open")

    owner = TwoPhaseCommitCoordinator(options, 60_000, open_log=lambda o: PausedDecisionLog(o, second_query_plans))
    epoch = EpochId.stream("owner-query", 0)
    owner.commit(epoch, prepared(options, epoch, tagged("owner", 50)))
    second_query.join(120)
    assert order == ["decision still open", "planned"]  # the fault fired; the planning waited for the decision
    assert values(kafka, sink) == sorted(tagged("owner", 50) * 2)
    assert open_transactions(kafka, prefix) == []


def test_a_java_default_delivery_timeout_is_accepted(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """kafka.delivery.timeout.ms=120000 (the Java client's default) was refused by librdkafka for the
    coordinator's short transaction; the tasks keep it, the coordinator caps its own."""
    sink, prefix = kafka.create_topic(1, "sink"), f"java-{uuid.uuid4().hex[:6]}"
    batch_write(rows(spark, "j", 30), kafka, sink, prefix, **{"kafka.delivery.timeout.ms": "120000"})
    assert values(kafka, sink) == sorted(tagged("j", 30))


class SessionThatLetsAnotherDriverIn:
    """The real transaction session; on its first ListTransactions of open transactions (the sweep's, not the
    lost-log check's, which lists committed ones), ``meanwhile`` runs first."""

    def __init__(self, session: TransactionSession, meanwhile: Callable[[], None]) -> None:
        self._session, self._meanwhile = session, meanwhile

    def __getattr__(self, name: str) -> object:
        return getattr(self._session, name)

    def list_transactions(self, *args: object, **kwargs: object) -> object:
        if "Ongoing" in [str(state) for state in kwargs.get("state_filters", ())]:  # type: ignore[attr-defined]
            meanwhile, self._meanwhile = self._meanwhile, lambda: None
            meanwhile()
        return self._session.list_transactions(*args, **kwargs)  # type: ignore[arg-type]


def test_a_superseded_driver_on_a_prefix_without_records_never_aborts_a_decided_participant(kafka: KafkaTestCluster) -> None:
    """Two batch jobs start at once on a new prefix. Job A fences, lists what is open, and only then job B
    fences A and decides (its driver dies before phase 2). A must prove it still owns the prefix before it
    aborts what it listed; with no record to re-append, that proof used to be skipped."""
    sink, prefix = kafka.create_topic(2, "sink"), f"new-{uuid.uuid4().hex[:6]}"
    options = sink_options(kafka, sink, prefix)
    job_b = EpochId.batch("job-b")
    b_tasks = prepared(options, job_b, tagged("b", 40))
    crash = DieAfterDecision()

    def job_b_decides() -> None:
        with pytest.raises(DriverKilled):
            TwoPhaseCommitCoordinator(options, 60_000, crash).commit(job_b, b_tasks)

    def racing_session(connection: KafkaConnection) -> TransactionSession:
        return SessionThatLetsAnotherDriverIn(cached_session(connection), job_b_decides)  # type: ignore[return-value]

    with pytest.raises(Exception, match="no longer owns prefix"):
        TwoPhaseCommitCoordinator(options, 60_000, session_of=racing_session).prepare(EpochId.batch("job-a"))
    assert crash.fired
    TwoPhaseCommitCoordinator(options, 60_000).recover()  # what the next start of the prefix does
    assert values(kafka, sink) == sorted(tagged("b", 40) * 2)
    assert open_transactions(kafka, prefix) == []


def test_a_replay_over_other_source_offsets_than_its_decision_is_refused(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """Spark replays a micro-batch over the offsets it planned; a "replay" of other offsets (a checkpoint
    edited or rolled back) is another batch under a decided id: refused, instead of accepted as done."""
    source, sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
    checkpoint, prefix = tmp_path / "checkpoint", f"orders-{uuid.uuid4().hex[:6]}"
    first = produce(kafka, source, 40, "first")
    stream(spark, kafka, source, sink, checkpoint, prefix)  # micro-batches 0 (0-19) and 1 (20-39)
    assert _forget_last_commit(checkpoint) == 1
    planned = checkpoint / "offsets" / "1"
    text = planned.read_text()
    end = f'"{source}": {{"0": 40}}'
    assert end in text, text
    planned.write_text(text.replace(end, f'"{source}": {{"0": 30}}'))
    (checkpoint / "offsets" / ".1.crc").unlink(missing_ok=True)
    refused = (r'refused micro-batch 1 .*planned it again over other input .*Decided: 20 rows, source offsets from .*"0":20.* '
               r'to .*"0":40.*This run: 10 rows, source offsets from .*"0":20.* to .*"0":30')
    with pytest.raises(StreamingQueryException, match=refused):
        stream(spark, kafka, source, sink, checkpoint, prefix)
    assert values(kafka, sink) == expected(first)
    assert open_transactions(kafka, prefix) == []


@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_task_never_fences_an_attempt_that_took_its_id_after_it_looked(
        kafka: KafkaTestCluster, monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    """Two attempts of one partition (a stage retry restarts attempt numbers, a zombie still writes) pick
    ids from the same candidates. The other attempt opens its transaction on the first candidate after
    this task saw it free and before this task's producer starts (on either write path): this task must
    take the next one."""
    from spark_kafka_eos._internal.write import task_producer

    monkeypatch.setenv(WRITE_ENGINE_VARIABLE, engine)
    sink, prefix = kafka.create_topic(1, "sink"), f"race-{uuid.uuid4().hex[:6]}"
    options = sink_options(kafka, sink, prefix)
    epoch = EpochId.stream("race-query", 0)
    first_id = task_producer.task_transactional_id_candidates(prefix, epoch, 0, 0)[0]
    other: list[OpenTransaction] = []

    class OtherAttemptGetsThereFirst(task_producer._TaskTransaction):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if not other:
                other.append(kafka.open_transaction(sink, [Sent(0, None, b"other-attempt")], transactional_id=first_id))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(task_producer, "_TaskTransaction", OtherAttemptGetsThereFirst)
    [mine] = prepared(options, epoch, [b"this-attempt"], partitions=1)
    assert other and mine.transaction is not None and mine.transaction.transactional_id != first_id
    # Still the holder of its id: not fenced (a fenced producer's abort fails). Not a commit: only phase 2 commits a
    # task id, and a committed one on a prefix without a log record is taken for the history of a lost log.
    other[0].producer.abort_transaction(30)
    TwoPhaseCommitCoordinator(options, 60_000).commit(epoch, [mine])
    assert values(kafka, sink) == [b"this-attempt"]
    assert open_transactions(kafka, prefix) == []


class SlowDecisionLog(KafkaDecisionLog):
    """The decision transaction has started (its record is written) but its offsets take long to send."""

    def __init__(self, options: WriterOptions, delay_s: float) -> None:
        super().__init__(options)
        self._delay_s = delay_s
        self.delayed = False

    def append(self, record: LogRecord, group_offsets: Mapping[tuple[str, int], int] | None = None,
               before_commit: Callable[[], None] | None = None, commit_by: float | None = None) -> None:
        def slow() -> None:
            if record.kind == "decision":
                time.sleep(self._delay_s)
                self.delayed = True
            if before_commit is not None:
                before_commit()
        super().append(record, group_offsets, slow, commit_by)


def test_the_deadline_is_judged_on_the_brokers_clock_at_the_commit_not_at_the_decisions_start(kafka: KafkaTestCluster) -> None:
    """The decision's writes outlast the participants' remaining time: it must be aborted before it commits
    (nothing visible, a clear error), not committed too late (a decided epoch whose participants timed out)."""
    sink, prefix = kafka.create_topic(1, "sink"), f"late-{uuid.uuid4().hex[:6]}"
    options = sink_options(kafka, sink, prefix)
    epoch = EpochId.stream("late-query", 0)
    batch = pa.record_batch([pa.array(tagged("late", 10), pa.binary())], names=["value"])
    tasks = [write_task(options, epoch, [batch], task=TaskIdentity(0, 0, 0), transaction_timeout_ms=20_000)]
    slow_log: list[SlowDecisionLog] = []

    def open_slow_log(o: WriterOptions) -> KafkaDecisionLog:
        slow_log.append(SlowDecisionLog(o, delay_s=12))
        return slow_log[-1]

    with pytest.raises(KafkaEosEpochAbortedError, match="aborted instead of committed.*less than the 10s margin"):
        TwoPhaseCommitCoordinator(options, 20_000, open_log=open_slow_log).commit(epoch, tasks)
    assert any(log_.delayed for log_ in slow_log)
    assert values(kafka, sink) == []
    assert open_transactions(kafka, prefix) == []


def test_an_empty_backfill_re_run_once_its_input_arrived_writes_it(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """A date's backfill ran before its input landed and wrote nothing; the re-run of that date writes it.
    Only a run that decided something is remembered as done."""
    sink, prefix = kafka.create_topic(2, "sink"), f"daily-{uuid.uuid4().hex[:6]}"
    batch_write(rows(spark, "d1", 0), kafka, sink, prefix, writeId="daily-d1")
    batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="daily-d1")
    assert values(kafka, sink) == sorted(tagged("d1"))
    assert open_transactions(kafka, prefix) == []


class DecisionLogThatLandsThenReportsATimeout(KafkaDecisionLog):
    """The decision commits; before its write returns, ``meanwhile`` runs (another driver), then the write
    reports a timeout, as when the commit's answer is lost."""

    def __init__(self, options: WriterOptions, meanwhile: Callable[[], None]) -> None:
        super().__init__(options)
        self._meanwhile = meanwhile
        self.fired = False

    def append(self, record: LogRecord, group_offsets: Mapping[tuple[str, int], int] | None = None,
               before_commit: Callable[[], None] | None = None, commit_by: float | None = None) -> None:
        super().append(record, group_offsets, before_commit, commit_by)
        if record.kind == "decision" and not self.fired:
            self.fired = True
            self._meanwhile()
            raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, "the decision's commit timed out (injected)"))


def test_a_decision_whose_write_reported_an_error_but_landed_and_was_finished_by_another_driver_is_reported_committed(
        kafka: KafkaTestCluster) -> None:
    """Job 1's decision commits, but its write reports a timeout. Meanwhile another driver finished it and
    ran job 2, so the prefix's last record is job 2's. Job 1 must be reported committed ("do not re-run"),
    not "aborted, nothing visible" (a re-run on that word would write it twice, were it not remembered)."""
    sink, prefix = kafka.create_topic(2, "sink"), f"lost-answer-{uuid.uuid4().hex[:6]}"
    options = sink_options(kafka, sink, prefix)
    job_1, job_2 = EpochId.batch("job-1"), EpochId.batch("job-2")

    def another_driver_finishes_job_1_and_runs_job_2() -> None:
        TwoPhaseCommitCoordinator(options, 60_000).recover()
        TwoPhaseCommitCoordinator(options, 60_000).commit(job_2, prepared(options, job_2, tagged("two", 20)))

    answer_lost: list[DecisionLogThatLandsThenReportsATimeout] = []

    def open_log(o: WriterOptions) -> KafkaDecisionLog:
        if not answer_lost:
            answer_lost.append(DecisionLogThatLandsThenReportsATimeout(o, another_driver_finishes_job_1_and_runs_job_2))
        return answer_lost[0]

    tasks = prepared(options, job_1, tagged("one", 20))
    with pytest.raises(KafkaEosEpochCommittedError, match="Epoch batch:job-1 .* IS COMMITTED .*Do not re-run it"):
        TwoPhaseCommitCoordinator(options, 60_000, open_log=open_log).commit(job_1, tasks)
    assert answer_lost[0].fired
    assert values(kafka, sink) == sorted(tagged("one", 20) * 2 + tagged("two", 20) * 2)

    TwoPhaseCommitCoordinator(options, 60_000).commit(job_1, prepared(options, job_1, tagged("one", 20)))  # re-run anyway
    assert values(kafka, sink) == sorted(tagged("one", 20) * 2 + tagged("two", 20) * 2)
    assert open_transactions(kafka, prefix) == []
