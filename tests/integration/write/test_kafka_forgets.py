"""Exactly-once when Kafka forgets on purpose: a consumer group's offsets expire or are deleted, a decision log
is deleted after operations that committed nothing, participants time out after a decision and an operator
accepts the loss. Each ends with every row exactly once, or with a loud error before anything is visible,
counted by an independent read_committed consumer."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from spark_kafka_eos._internal.cluster import cached_session
from spark_kafka_eos._internal.config.writer import parse_writer_options
from spark_kafka_eos._internal.decision_log import records as log_record
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord
from spark_kafka_eos._internal.txn.session import TransactionSession, TxnState
from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
from spark_kafka_eos._internal.write.hooks import WriterHooks
from spark_kafka_eos._internal.write.ownership import Verdict
from spark_kafka_eos._internal.write.recovery import abort_prepared
from spark_kafka_eos._internal.write.task_producer import TaskIdentity, write_task
from spark_kafka_eos.cli import main as cli
from spark_kafka_eos.errors import CommitOutcome, KafkaEosRunRefusedError, commit_outcome
from tests.harness.faults import FAIL_AT_OPTION, FAULTS_FORMAT, clear_fired, fired
from tests.harness.kafka import KafkaRecord, KafkaTestCluster
from tests.harness.local_kafka import LocalKafka
from tests.harness.pipeline import open_transactions
from tests.integration.write.test_epoch_identity import batch_write, expected, produce, values
from tests.integration.write.test_operator_calendar import DieAfterDecision, DieAt, DriverKilled, prepared, rows, sink_options, tagged

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def backfill(spark: SparkSession, kafka: KafkaTestCluster, source: str, sink: str, prefix: str, group: str,
             write_id: str, starting: str = "group") -> None:
    """A backfill that resumes from ``group`` (startingOffsets=group) and commits its progress to it."""
    (spark.read.format("kafka_eos").option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("subscribe", source)
     .option("startingOffsets", starting).option("consumerGroup", group).load()
     .selectExpr("value", "topic AS source_topic", "partition AS source_partition", "offset AS source_offset")
     .write.format("kafka_eos").mode("append").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
     .option("topic", sink).option("transactional.id.prefix", prefix).option("consumerGroup", group)
     .option("writeId", write_id).save())


def _forgotten_group_is_refused_then_resumed(spark: SparkSession, kafka: KafkaTestCluster, forget: str) -> None:
    source, sink, group = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink"), f"weekly-{uuid.uuid4().hex[:6]}"
    prefix = f"weekly-{uuid.uuid4().hex[:6]}"
    first = produce(kafka, source, 100, "w1")
    backfill(spark, kafka, source, sink, prefix, group, "w1")
    assert kafka.group_offsets(group, source) == {0: 100}

    if forget == "deleted":
        kafka.admin.delete_consumer_groups([group], request_timeout=30)[group].result(30)
    deadline = time.monotonic() + 180
    while kafka.group_offsets(group, source) != {0: -1001}:  # expired by the broker, or deleted
        assert time.monotonic() < deadline, f"the group's offsets were not {forget}"
        time.sleep(2)

    later = produce(kafka, source, 50, "w2")
    with pytest.raises(Exception, match=f"consumerGroup '{group}' has no committed offset for partitions this transactional.id.prefix "
                                        f"committed it to before \\({source}-0: from 0, committed to 100\\).*safe to re-run.*"
                                        f"startingOffsets', '{{\"{source}\":{{\"0\":100}}}}'"):
        backfill(spark, kafka, source, sink, prefix, group, "w2")  # reads from earliest: the group has nothing
    assert values(kafka, sink) == expected(first)
    assert open_transactions(kafka, prefix) == []

    # The fix the error names: resume where the group stood; the group holds offsets again afterwards.
    backfill(spark, kafka, source, sink, prefix, group, "w2", starting=f'{{"{source}":{{"0":100}}}}')
    assert values(kafka, sink) == expected(first, later)
    assert kafka.group_offsets(group, source) == {0: 150}


def test_a_backfill_resuming_from_a_deleted_group_is_refused_before_anything_is_visible(
        spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """The reported 200 of 100: a clean-up script deletes the memberless group between two backfills."""
    _forgotten_group_is_refused_then_resumed(spark, kafka, "deleted")


@pytest.fixture(scope="module")
def forgetful_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTestCluster]:
    """A broker that expires a memberless group's offsets one minute after their last commit (checked every second)."""
    broker = LocalKafka(tmp_path_factory.mktemp("forgetful-kafka"),
                        overrides={"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "1000"})
    broker.start()
    try:
        yield KafkaTestCluster(broker.bootstrap_servers)
    finally:
        broker.kill()


@pytest.mark.long  # a broker of its own, or a wait for a transaction timeout: make test-all
def test_a_backfill_resuming_from_a_group_whose_offsets_expired_is_refused_before_anything_is_visible(
        spark: SparkSession, forgetful_kafka: KafkaTestCluster) -> None:
    """The reported 200 of 100: a weekly job, whose group's offsets the broker expired
    (offsets.retention.minutes) before the next run. The prefix's index group expires with them."""
    _forgotten_group_is_refused_then_resumed(spark, forgetful_kafka, "expired")


@pytest.mark.parametrize("no_op", ["re-run", "recover", "empty job"])
def test_a_decision_log_deleted_after_an_operation_that_committed_nothing_is_an_error_not_a_fresh_start(
        spark: SparkSession, kafka: KafkaTestCluster, no_op: str) -> None:
    """d1 commits; an operation fences the prefix's coordinator and commits nothing (a no-op re-run, kafka-eos
    recover, an empty job); the decision log is deleted; d1 is re-run. The fence left the coordinator id Empty,
    which read as "never committed": the re-run wrote all of d1 again."""
    sink, prefix, decision_log = kafka.create_topic(2, "sink"), f"daily-{uuid.uuid4().hex[:6]}", f"decisions-{uuid.uuid4().hex[:6]}"
    batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="d1", decisionLogTopic=decision_log)
    if no_op == "re-run":
        batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="d1", decisionLogTopic=decision_log)
    elif no_op == "recover":
        assert cli(["recover", "--bootstrap-servers", kafka.bootstrap_servers, "--prefix", prefix,
                    "--decision-log-topic", decision_log]) == 1  # nothing to do
    else:
        batch_write(rows(spark, "empty", 0), kafka, sink, prefix, writeId="empty", decisionLogTopic=decision_log)
    # Whatever process ran it, the operation initialised the coordinator id (as a new worker does) and left it committed.
    assert cached_session(parse_writer_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": sink,
                                                "transactional.id.prefix": prefix}, streaming=False).connection).describe(
        [f"{prefix}-coordinator"])[f"{prefix}-coordinator"].state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
    assert values(kafka, sink) == sorted(tagged("d1"))

    kafka.delete_topic(decision_log)
    # The advice says that after the reset a restart on the old checkpoint, or an earlier writeId, is written again.
    lost = (f"'{decision_log}' .*has no record of transactional.id.prefix '{prefix}'.*kafka-eos reset.*--yes`, and start the query "
            r"on a new checkpoint \(or a batch job under a new writeId\).*an earlier writeId all of it")
    with pytest.raises(Exception, match=lost):
        batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="d1", decisionLogTopic=decision_log)
    assert values(kafka, sink) == sorted(tagged("d1"))
    assert open_transactions(kafka, prefix) == []


def test_a_decision_log_deleted_after_a_driver_died_between_its_fence_and_its_decision_is_an_error_not_a_fresh_start(
        spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """d1 commits; job d2's driver dies before its decision: its fence committed the prefix's last record again at
    once, so the coordinator id shows a commit. Then a driver fences the id and dies at once (InitProducerId leaves
    it Empty, and a dead driver leaves no mark); the decision log is deleted; d1 is re-run. Its committed task ids
    show that the prefix has history: the re-run is refused, not written twice."""
    sink, prefix, decision_log = kafka.create_topic(2, "sink"), f"daily-{uuid.uuid4().hex[:6]}", f"decisions-{uuid.uuid4().hex[:6]}"
    batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="d1", decisionLogTopic=decision_log)
    options = parse_writer_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": sink, "transactional.id.prefix": prefix,
                                    "decisionLogTopic": decision_log}, streaming=False)
    epoch = EpochId.batch("d2")
    task = write_task(options, epoch, [pa.record_batch([pa.array([b"d2"], pa.binary())], names=["value"])], task=TaskIdentity(0, 0, 0))
    crash = DieAt("before_decision")  # after its fence: nothing of the coordinator runs after it
    with pytest.raises(DriverKilled):
        TwoPhaseCommitCoordinator(options, TIMEOUT_MS, crash).commit(epoch, [task])
    session = cached_session(options.connection)
    coordinator_id = f"{prefix}-coordinator"
    assert crash.fired and session.describe([coordinator_id])[coordinator_id].state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
    assert task.transaction is not None
    abort_prepared(session, [task.transaction])  # as the broker does once it times out
    session.init_producer_id(coordinator_id, 60_000)  # a driver's fence, and its death
    assert session.describe([coordinator_id])[coordinator_id].state == TxnState.EMPTY

    kafka.delete_topic(decision_log)
    with pytest.raises(Exception, match=f"no record of transactional.id.prefix '{prefix}', but that prefix has committed decisions "
                                        f"\\(its task transaction {prefix}-[0-9a-f]{{8}}-0-[01]-0 committed\\).*kafka-eos reset"):
        batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="d1", decisionLogTopic=decision_log)
    assert values(kafka, sink) == sorted(tagged("d1"))
    assert open_transactions(kafka, prefix) == []


class DieInPhase2(WriterHooks):
    """The driver dies after the decision, having committed the first ``committed`` participants."""

    def __init__(self, committed: int) -> None:
        self.committed = committed
        self.fired = False

    def at(self, point: str, session: object, decision: LogRecord) -> None:  # type: ignore[override]
        if point == "during_phase2":
            assert isinstance(session, TransactionSession)
            for participant in decision.participants[:self.committed]:
                session.commit(participant.txn)
            self.fired = True
            raise DriverKilled(decision.epoch_id)


TIMEOUT_MS = 20_000


def _decide_then_die(kafka: KafkaTestCluster, sink: str, prefix: str, write_id: str, committed: int,
                     source: list[KafkaRecord] | None = None, group: str | None = None) -> None:
    """Job ``write_id`` (two tasks, as Spark's d1 would write them; copying ``source`` and committing ``group``
    when given) decides with a 20 s transaction timeout; its driver dies in phase 2 and stays down until the
    participants it did not commit have timed out."""
    options = parse_writer_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": sink, "transactional.id.prefix": prefix,
                                    "kafka.transaction.timeout.ms": str(TIMEOUT_MS), **({"consumerGroup": group} if group else {})},
                                   streaming=False)
    epoch = EpochId.batch(write_id)

    def batch(part: list[bytes], positions: list[KafkaRecord]) -> pa.RecordBatch:
        if not positions:
            return pa.record_batch([pa.array(part, pa.binary())], names=["value"])
        return pa.record_batch([pa.array(part, pa.binary()), pa.array([r.topic for r in positions], pa.string()),
                                pa.array([r.partition for r in positions], pa.int32()), pa.array([r.offset for r in positions], pa.int64())],
                               names=["value", "source_topic", "source_partition", "source_offset"])

    values_ = [r.value or b"" for r in source] if source else tagged(write_id)
    positions = source or []
    halves = [(values_[:50], positions[:50]), (values_[50:], positions[50:])]
    tasks = [write_task(options, epoch, [batch(part, where)], task=TaskIdentity(p, 0, p), transaction_timeout_ms=TIMEOUT_MS)
             for p, (part, where) in enumerate(halves)]
    crash = DieInPhase2(committed)
    with pytest.raises(DriverKilled):
        TwoPhaseCommitCoordinator(options, TIMEOUT_MS, crash).commit(epoch, tasks)
    assert crash.fired
    session = cached_session(options.connection)
    ids = [t.transaction.transactional_id for t in tasks if t.transaction is not None][committed:]
    deadline = time.monotonic() + 90
    while any(d.state == TxnState.ONGOING for d in session.describe(ids).values()):
        assert time.monotonic() < deadline, "the broker did not abort the timed-out participants"
        time.sleep(2)


def _reset_accepting_loss(kafka: KafkaTestCluster, prefix: str) -> None:
    assert cli(["reset", "--bootstrap-servers", kafka.bootstrap_servers, "--prefix", prefix, "--yes", "--accept-data-loss"]) == 0


def test_a_job_whose_output_was_all_lost_is_written_by_its_re_run_after_a_reset_that_accepts_the_loss(
        spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """The reported 0 of 100: the re-run fails loudly (lost); the operator resets with --accept-data-loss and
    re-runs d1, as the error says. The reset kept d1 in the history, so the re-run was taken for a replay."""
    sink, prefix = kafka.create_topic(2, "sink"), f"lost-{uuid.uuid4().hex[:6]}"
    _decide_then_die(kafka, sink, prefix, "d1", committed=0)
    with pytest.raises(Exception, match="d1 .*LOST.*None of its records is visible.*--accept-data-loss.*re-run it whole"):
        batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="d1")
    assert values(kafka, sink) == []

    _reset_accepting_loss(kafka, prefix)
    batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="d1")
    assert values(kafka, sink) == sorted(tagged("d1"))
    batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="d1")  # and from then on it is d1 again
    assert values(kafka, sink) == sorted(tagged("d1"))
    assert open_transactions(kafka, prefix) == []


@pytest.mark.long  # a broker of its own, or a wait for a transaction timeout: make test-all
def test_a_backfill_whose_output_was_all_lost_resumes_from_its_group_after_the_reset_moves_it_back(
        spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """The lost decision had moved its consumerGroup past its input: a re-run from the group after the reset would
    have started past the lost records. The reset moves the group back to where the epoch started."""
    source, sink, group = kafka.create_topic(1, "src"), kafka.create_topic(2, "sink"), f"lost-{uuid.uuid4().hex[:6]}"
    prefix = f"lost-{uuid.uuid4().hex[:6]}"
    sent = produce(kafka, source, 100, "r")
    _decide_then_die(kafka, sink, prefix, "d1", committed=0, source=kafka.read_committed(source), group=group)
    assert kafka.group_offsets(group, source) == {0: 100}
    with pytest.raises(Exception, match="LOST.*the reset moves the group back"):
        backfill(spark, kafka, source, sink, prefix, group, "d1")
    _reset_accepting_loss(kafka, prefix)
    assert kafka.group_offsets(group, source) == {0: 0}
    backfill(spark, kafka, source, sink, prefix, group, "d1")
    assert values(kafka, sink) == expected(sent)
    assert kafka.group_offsets(group, source) == {0: 100}
    assert open_transactions(kafka, prefix) == []


@pytest.mark.long  # a broker of its own, or a wait for a transaction timeout: make test-all
def test_a_job_whose_output_was_partly_lost_is_refused_a_whole_re_run_after_the_reset(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """Half of d1 was committed before the driver died, half timed out. A re-run of d1 can neither be skipped
    (half is missing) nor written whole (half would be twice): refused, naming the fix."""
    sink, prefix = kafka.create_topic(2, "sink"), f"half-{uuid.uuid4().hex[:6]}"
    _decide_then_die(kafka, sink, prefix, "d1", committed=1)
    visible = values(kafka, sink)
    assert len(visible) == 50
    with pytest.raises(Exception, match="LOST.*for the partitions named only.*new writeId"):
        batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="d1")

    _reset_accepting_loss(kafka, prefix)
    with pytest.raises(Exception, match="refused batch write d1: .*accepted the loss of part of its output.*Fix: re-run only the lost"):
        batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="d1")
    assert values(kafka, sink) == visible
    assert open_transactions(kafka, prefix) == []


def test_a_job_without_write_id_whose_commit_fails_after_the_decision_fails_saying_it_is_committed(
        spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """The commit fails after the decision (here: an injected error; in life, the commit's Python worker dies);
    Spark's abort() finds the epoch decided and rolls it forward. The job's failure must say that its data IS
    committed: without a writeId, an orchestrator's retry is a new job and would write everything again."""
    sink, prefix = kafka.create_topic(2, "sink"), f"nowriteid-{uuid.uuid4().hex[:6]}"
    clear_fired()
    with pytest.raises(Exception, match="IS COMMITTED.*Do not re-run") as committed:
        (rows(spark, "j").write.format(FAULTS_FORMAT).mode("append").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
         .option("topic", sink).option("transactional.id.prefix", prefix).option(FAIL_AT_OPTION, "after_decision").save())
    assert commit_outcome(committed.value) is CommitOutcome.COMMITTED  # through Spark's wrapping
    assert len(fired("after_decision")) == 1
    assert values(kafka, sink) == sorted(tagged("j"))
    assert open_transactions(kafka, prefix) == []


def test_a_write_id_older_than_the_history_a_record_carries_is_recognised_from_its_archive(
        kafka: KafkaTestCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hourly jobs: past the runs the prefix's last record carries (1,000; 3 here), the oldest are archived in
    records of their own, and a re-run of one writes nothing, however long ago it ran."""
    monkeypatch.setattr(log_record, "HISTORY_LIMIT", 3)
    monkeypatch.setattr(log_record, "ARCHIVE_BATCH", 2)
    sink, prefix = kafka.create_topic(1, "sink"), f"hourly-{uuid.uuid4().hex[:6]}"
    options = sink_options(kafka, sink, prefix)
    for hour in [*range(8), 0, 5]:  # two re-runs: one archived, one still in the record's history
        job = EpochId.batch(f"hour-{hour}")
        coordinator = TwoPhaseCommitCoordinator(options, 60_000)
        if coordinator.prepare(job).verdict == Verdict.PROCEED:
            coordinator.commit(job, prepared(options, job, tagged(f"hour-{hour}", 10), partitions=1))
    last = KafkaDecisionLog(options).last(prefix)
    assert last is not None and len(last.archives) == 2 and "batch:hour-0" not in dict(last.runs())
    assert values(kafka, sink) == sorted(v for hour in range(8) for v in tagged(f"hour-{hour}", 10))
    assert open_transactions(kafka, prefix) == []


def test_a_micro_batch_replayed_after_its_run_was_archived_is_refused_not_taken_for_a_replay(
        kafka: KafkaTestCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the operator model (CHECK_INPUT_OF_ARCHIVED_STREAM_RUNS): a query decided micro-batch 0, its prefix
    was reset and went on with batch jobs until that run was archived; the query restarted on its checkpoint, whose
    offsets/0 was lost, so Spark planned micro-batch 0 again over other input. An archived run keeps no input to
    compare with: b0050cf took it for a replay (told success, its records aborted as duplicates: lost). Refused."""
    monkeypatch.setattr(log_record, "HISTORY_LIMIT", 3)
    monkeypatch.setattr(log_record, "ARCHIVE_BATCH", 2)
    sink, prefix = kafka.create_topic(1, "sink"), f"archived-{uuid.uuid4().hex[:6]}"
    options = sink_options(kafka, sink, prefix)
    first = EpochId.stream(f"query-{uuid.uuid4().hex[:6]}", 0)
    coordinator = TwoPhaseCommitCoordinator(options, 60_000)
    assert coordinator.prepare(first).verdict == Verdict.PROCEED
    coordinator.commit(first, prepared(options, first, tagged("first", 5), partitions=1))
    assert cli(["reset", "--bootstrap-servers", kafka.bootstrap_servers, "--prefix", prefix, "--yes"]) == 0
    for day in range(5):
        job = EpochId.batch(f"day-{day}")
        coordinator = TwoPhaseCommitCoordinator(options, 60_000)
        assert coordinator.prepare(job).verdict == Verdict.PROCEED
        coordinator.commit(job, prepared(options, job, tagged(f"day-{day}", 2), partitions=1))
    last = KafkaDecisionLog(options).last(prefix)
    assert last is not None and last.archives and str(first) not in dict(last.runs())  # the query's run is archived
    with pytest.raises(KafkaEosRunRefusedError, match="micro-batch 0: a replay that can no longer be recognised"):
        TwoPhaseCommitCoordinator(options, 60_000).prepare(first)
    assert values(kafka, sink) == sorted([*tagged("first", 5), *(v for day in range(5) for v in tagged(f"day-{day}", 2))])
    assert open_transactions(kafka, prefix) == []


def test_a_resume_from_a_group_moved_by_a_decision_its_re_created_log_forgot_is_refused(
        spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """The group moved with a decision whose driver died before phase 2; then its decision log was deleted and
    re-created. Nothing can tell whether the records before the group's offsets are visible: a reader resuming
    from the group must not take the missing record for "finished" and start past them."""
    source, sink, group = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink"), f"etl-{uuid.uuid4().hex[:6]}"
    first, decisions = f"first-{uuid.uuid4().hex[:6]}", f"decisions-{uuid.uuid4().hex[:6]}"
    produce(kafka, source, 300, "r")
    records = kafka.read_committed(source)
    options = parse_writer_options({"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": sink, "transactional.id.prefix": first,
                                    "consumerGroup": group, "decisionLogTopic": decisions}, streaming=False)
    batch = pa.record_batch([pa.array([r.value for r in records], pa.binary()), pa.array([r.topic for r in records], pa.string()),
                             pa.array([r.partition for r in records], pa.int32()), pa.array([r.offset for r in records], pa.int64())],
                            names=["value", "source_topic", "source_partition", "source_offset"])
    epoch = EpochId.batch("part-1")
    tasks = [write_task(options, epoch, [batch], task=TaskIdentity(0, 0, 0), transaction_timeout_ms=60_000)]
    crash = DieAfterDecision()
    with pytest.raises(DriverKilled):
        TwoPhaseCommitCoordinator(options, 60_000, crash).commit(epoch, tasks)
    assert crash.fired
    deadline = time.monotonic() + 30  # the decision's offset commit lands with its transaction's markers
    while kafka.group_offsets(group, source) != {0: 300}:
        assert time.monotonic() < deadline, "the decision did not move the group"
        time.sleep(0.5)
    kafka.recreate_topic(decisions, 1, {"cleanup.policy": "compact"})

    second = f"second-{uuid.uuid4().hex[:6]}"
    with pytest.raises(Exception, match=f"consumerGroup '{group}' was moved by batch:part-1 of prefix '{first}', but its decision log "
                                        f"'{decisions}' has no record of that prefix.*Nothing was read or written"):
        backfill(spark, kafka, source, sink, second, group, "next")
    assert open_transactions(kafka, second) == []
    assert kafka.group_offsets(group, source) == {0: 300}


def test_recover_on_a_re_created_decision_log_is_refused_and_a_re_run_stays_refused(
        spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """Found by the operator model: d1 commits; its log is deleted and re-created; `kafka-eos recover` fenced the
    coordinator id, left it Empty, and the re-run of d1 was written again."""
    sink, prefix, decisions = kafka.create_topic(2, "sink"), f"daily-{uuid.uuid4().hex[:6]}", f"decisions-{uuid.uuid4().hex[:6]}"
    batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="d1", decisionLogTopic=decisions)
    kafka.recreate_topic(decisions, 1, {"cleanup.policy": "compact"})
    assert cli(["recover", "--bootstrap-servers", kafka.bootstrap_servers, "--prefix", prefix, "--decision-log-topic", decisions]) != 0
    with pytest.raises(Exception, match=f"has no record of transactional.id.prefix '{prefix}'"):
        batch_write(rows(spark, "d1"), kafka, sink, prefix, writeId="d1", decisionLogTopic=decisions)
    assert values(kafka, sink) == sorted(tagged("d1"))
    assert open_transactions(kafka, prefix) == []


def test_a_fresh_start_reset_aborts_what_a_crashed_first_job_left_open(kafka: KafkaTestCluster) -> None:
    """Found by the operator model: the prefix's first job dies before its decision; `kafka-eos reset --yes` on a
    prefix with no record appended its reset and left the job's transactions open, pinning the sink's LSO."""
    sink, prefix = kafka.create_topic(2, "sink"), f"first-{uuid.uuid4().hex[:6]}"
    options = sink_options(kafka, sink, prefix)
    prepared(options, EpochId.batch("d1"), tagged("d1"))  # the driver died before deciding
    assert len(open_transactions(kafka, prefix)) == 2
    assert cli(["reset", "--bootstrap-servers", kafka.bootstrap_servers, "--prefix", prefix, "--yes"]) == 0
    assert open_transactions(kafka, prefix) == []
    assert values(kafka, sink) == []
