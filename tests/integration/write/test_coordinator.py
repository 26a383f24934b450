"""The coordinator and recovery without Spark: replays, refusals and loud data loss."""

from __future__ import annotations

import re
import time
import uuid

import pyarrow as pa
import pytest
from confluent_kafka.admin import OffsetSpec

from spark_kafka_eos._internal.cluster import open_session
from spark_kafka_eos._internal.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log import kafka_log as decision_log_module
from spark_kafka_eos._internal.decision_log.coordinator_id import coordinator_transactional_id
from spark_kafka_eos._internal.decision_log.index_group import index_group
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord, Participant
from spark_kafka_eos._internal.txn.session import TxnState
from spark_kafka_eos._internal.write.commit_message import TaskCommit
from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
from spark_kafka_eos._internal.write.ownership import Verdict
from spark_kafka_eos._internal.write.task_producer import TaskIdentity, write_task
from spark_kafka_eos._internal.write.transactional_id import task_transactional_id
from spark_kafka_eos.errors import (
    KafkaEosCommittedDataLostError,
    KafkaEosDecisionLogError,
    KafkaEosEpochCommittedError,
    KafkaEosOutputUnverifiableError,
    KafkaEosRunRefusedError,
)
from tests.harness.coordinator import TIMEOUT_MS, committed_values, prepare, sink_options, stream_epoch
from tests.harness.faults import AbortAfterDecision, FaultHooks, InjectedFault
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.pipeline import open_transactions

pytestmark = pytest.mark.kafka


def test_a_replayed_epoch_is_not_written_twice(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(2)
    options = sink_options(kafka, topic)
    coordinator = TwoPhaseCommitCoordinator(options, TIMEOUT_MS)
    coordinator.commit(stream_epoch(0), [prepare(options, 0, ["a"]), prepare(options, 1, ["b"])])
    # Spark re-runs batch 0 (crash before its commit log): new transactions with the same data.
    replay = [prepare(options, 0, ["a"]), prepare(options, 1, ["b"])]
    coordinator.commit(stream_epoch(0), replay)
    assert committed_values(kafka, topic) == [b"a", b"b"]
    coordinator.commit(stream_epoch(1), [prepare(options, 0, ["c"], stream_epoch(1)), None])
    assert committed_values(kafka, topic) == [b"a", b"b", b"c"]
    assert open_transactions(kafka, options.prefix) == []


def test_a_replay_whose_tasks_miss_the_decision_after_the_index_expired_is_aborted_by_the_driver(
        kafka: KafkaTestCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task's straggler check reads the prefix's index entry only, never a scan of the log. A micro-batch replayed
    after Kafka let that entry expire (a query paused for days) is then prepared as if new; the driver's commit reads
    the whole log, recognises the replay and aborts it: written once, nothing left open."""
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(0), [prepare(options, 0, ["zero"])])
    kafka.admin.delete_consumer_groups([index_group(options.prefix)])[index_group(options.prefix)].result(30)

    scans = []
    scanned_head = KafkaDecisionLog._scanned_head
    monkeypatch.setattr(KafkaDecisionLog, "_scanned_head", lambda log, prefix: scans.append(prefix) or scanned_head(log, prefix))
    replay = prepare(options, 0, ["zero"])
    assert replay.transaction is not None and scans == [], "the task's check scanned the log, or saw the decision"
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(0), [replay])

    assert scans and set(scans) == {options.prefix}, "the driver's commit reads the whole log"
    assert committed_values(kafka, topic) == [b"zero"]
    assert open_transactions(kafka, options.prefix) == []


def test_an_older_epoch_on_the_same_prefix_is_refused(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    coordinator = TwoPhaseCommitCoordinator(options, TIMEOUT_MS)
    coordinator.commit(stream_epoch(0), [])  # the query's first micro-batch, empty: the prefix knows the query
    coordinator.commit(stream_epoch(5), [prepare(options, 0, ["five"], stream_epoch(5))])
    with pytest.raises(KafkaEosRunRefusedError, match="already decided micro-batch 5 of this query, which is now at micro-batch 0"):
        coordinator.commit(stream_epoch(0), [prepare(options, 0, ["zero"])])
    assert committed_values(kafka, topic) == [b"five"]
    assert open_transactions(kafka, options.prefix) == []


def test_a_decided_participant_that_was_aborted_is_reported_as_lost(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(2)
    options = sink_options(kafka, topic)
    kept, doomed = prepare(options, 0, ["kept"]), prepare(options, 1, ["x", "y", "z"])
    assert kept.transaction is not None and doomed.transaction is not None
    decision_log = KafkaDecisionLog(options)
    decision_log.ensure_topic()
    decision = LogRecord(
        "decision", options.prefix, str(stream_epoch(3)),
        tuple(Participant(t.transaction.transactional_id, t.transaction.producer_id, t.transaction.producer_epoch, t.spark_partition, t.records, t.probe)
              for t in (kept, doomed) if t.transaction is not None),
    )
    decision_log.append(decision)
    with open_session(options.connection) as session:
        session.abort(doomed.transaction)  # as the broker does when a transaction times out
        with pytest.raises(KafkaEosCommittedDataLostError, match=rf"LOST: {doomed.transaction.transactional_id} \(({topic}-\d: \d records(, )?)+\)") as lost:
            TwoPhaseCommitCoordinator(options, TIMEOUT_MS).prepare()
    # The partitioner may spread the 3 null-key records over both partitions.
    assert sum(int(n) for n in re.findall(rf"{topic}-\d: (\d) records", str(lost.value))) == 3
    # The participant that could be committed was.
    assert committed_values(kafka, topic) == [b"kept"]
    assert open_transactions(kafka, options.prefix) == []


@pytest.mark.parametrize("fence", [False, True], ids=["aborted", "fenced"])
def test_a_participant_aborted_between_the_check_and_phase_2_of_the_commit_is_reported_lost(kafka: KafkaTestCluster, fence: bool) -> None:
    """Phase 2 of a commit's own decision sends EndTxn without describing the participants first: one aborted
    meanwhile (by another actor, or fenced as the broker's timeout does) refuses it, and is then reported lost, never
    taken for committed."""
    topic = kafka.create_topic(2)
    options = sink_options(kafka, topic)
    kept, doomed = prepare(options, 0, ["kept"]), prepare(options, 1, ["x", "y", "z"])
    assert doomed.transaction is not None
    with pytest.raises(KafkaEosCommittedDataLostError, match=rf"LOST: {doomed.transaction.transactional_id} "):
        TwoPhaseCommitCoordinator(options, TIMEOUT_MS, AbortAfterDecision(doomed.transaction, fence)).commit(stream_epoch(0), [kept, doomed])
    assert committed_values(kafka, topic) == [b"kept"]
    assert open_transactions(kafka, options.prefix) == []


def test_a_decision_log_with_several_partitions_is_refused(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    log_topic = kafka.create_topic(3, prefix="_decisions")
    options = parse_writer_options(
        {"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": topic, "transactional.id.prefix": f"coord-{uuid.uuid4().hex[:8]}",
         "decisionlogtopic": log_topic},
        streaming=True,
    )
    # The task reads the log after preparing: it is refused there already, and aborts its own transaction.
    with pytest.raises(KafkaEosDecisionLogError, match="has 3 partitions; it must have exactly 1"):
        prepare(options, 0, ["never"])
    with pytest.raises(KafkaEosDecisionLogError, match="has 3 partitions; it must have exactly 1"):
        TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(0), [])
    assert committed_values(kafka, topic) == []
    assert open_transactions(kafka, options.prefix) == []


def test_a_straggler_that_opens_after_the_sweep_is_aborted_by_the_next_epoch(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    coordinator = TwoPhaseCommitCoordinator(options, TIMEOUT_MS)
    coordinator.commit(stream_epoch(0), [prepare(options, 0, ["zero"])])
    # A speculative attempt of batch 0 that opened its transaction after the sweep, and died before it
    # could see that its epoch was decided.
    straggler_id = task_transactional_id(options.prefix, stream_epoch(0), 0, 1)
    straggler = kafka.open_transaction(topic, [Sent(0, None, b"late")], straggler_id)
    assert open_transactions(kafka, options.prefix) == [straggler_id]
    coordinator.commit(stream_epoch(1), [prepare(options, 0, ["one"], stream_epoch(1))])
    del straggler
    assert committed_values(kafka, topic) == [b"one", b"zero"]
    assert open_transactions(kafka, options.prefix) == []
    assert kafka.offsets(topic, OffsetSpec.latest()) == kafka.offsets(topic, OffsetSpec.latest(), committed=False)


def test_a_committed_participant_whose_id_was_reused_is_not_reported_lost(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    task = prepare(options, 0, ["kept"])
    assert task.transaction is not None
    decision_log = KafkaDecisionLog(options)
    decision_log.ensure_topic()
    decision_log.append(LogRecord("decision", options.prefix, str(stream_epoch(0)), (
        Participant(task.transaction.transactional_id, task.transaction.producer_id, task.transaction.producer_epoch, 0, task.records, task.probe),)))
    with open_session(options.connection) as session:
        session.commit(task.transaction)  # phase 2 ran; the driver died before recording completion
        kafka.wait_until_stable(topic)
        reused = prepare(options, 0, ["again"], stream_epoch(2))  # the same id, re-initialised: its state no longer says "committed"
        assert reused.transaction is not None and reused.transaction.producer_epoch != task.transaction.producer_epoch
        session.abort(reused.transaction)
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).prepare()  # records visible: no false alarm
    last = decision_log.last(options.prefix)
    assert last is not None and last.kind == "complete"
    assert committed_values(kafka, topic) == [b"kept"]


def test_another_record_at_a_participants_probe_is_not_taken_for_its_output(kafka: KafkaTestCluster) -> None:
    """A decision is rolled forward after its participant's id was reused and its sink topic deleted and
    re-created: the record now at the participant's probe offset is someone else's. Only the digest of
    the participant's own first record tells them apart: reported lost, not silently "visible"."""
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    task = prepare(options, 0, ["mine"])
    assert task.transaction is not None and task.probe == (topic, 0, 0) and task.probe_digest is not None
    decision_log = KafkaDecisionLog(options)
    decision_log.ensure_topic()
    decision_log.append(LogRecord("decision", options.prefix, str(stream_epoch(0)), (
        Participant(task.transaction.transactional_id, task.transaction.producer_id, task.transaction.producer_epoch, 0, task.records,
                    task.probe, task.probe_digest),)))
    with open_session(options.connection) as session:
        session.abort(task.transaction)  # as the broker does when it times out
        kafka.recreate_topic(topic)
        kafka.produce_plain(topic, [Sent(0, None, b"someone else's")])  # lands at offset 0
        with pytest.raises(KafkaEosCommittedDataLostError, match="LOST"):
            TwoPhaseCommitCoordinator(options, TIMEOUT_MS).prepare()


def _decided(options: WriterOptions, task: TaskCommit) -> None:
    """A decision of ``task`` alone in the log, its phase 2 not recorded."""
    assert task.transaction is not None
    decision_log = KafkaDecisionLog(options)
    decision_log.ensure_topic()
    decision_log.append(LogRecord("decision", options.prefix, str(stream_epoch(0)), (
        Participant(task.transaction.transactional_id, task.transaction.producer_id, task.transaction.producer_epoch, 0, task.records,
                    task.probe, task.probe_digest),)))


def test_a_participant_whose_probe_retention_removed_is_reported_unverifiable_not_lost(kafka: KafkaTestCluster) -> None:
    """Phase 2 committed the participant, its id was reused since (so the broker no longer says which
    transaction committed), and retention removed its first record: nothing can tell whether its output is
    visible. Reporting it LOST would send the operator to re-run it, duplicating what is there."""
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    task = prepare(options, 0, ["first", "second"])
    assert task.transaction is not None and task.probe == (topic, 0, 0)
    _decided(options, task)
    with open_session(options.connection) as session:
        session.commit(task.transaction)
        session.init_producer_id(task.transaction.transactional_id, TIMEOUT_MS)  # a later task reuses the id
    kafka.delete_records(topic, {0: 1})  # as retention does: the partition now starts at offset 1
    with pytest.raises(KafkaEosOutputUnverifiableError, match=f"cannot be told, retention removed it \\({topic}-0 starts at offset 1 now"):
        TwoPhaseCommitCoordinator(options, TIMEOUT_MS).prepare()
    assert committed_values(kafka, topic) == [b"second"]


def test_an_aborted_participant_on_a_compacted_topic_is_reported_unverifiable(kafka: KafkaTestCluster) -> None:
    """On a compacted topic a missing record may have been aborted or compacted away: the error says it
    cannot be told, instead of asserting a loss."""
    topic = kafka.create_topic(1, config={"cleanup.policy": "compact"})
    options = sink_options(kafka, topic)
    batch = pa.record_batch([pa.array(["k"], pa.string()), pa.array(["v"], pa.string())], names=["key", "value"])
    task = write_task(options, stream_epoch(0), [batch], task=TaskIdentity(0, 0, 0), transaction_timeout_ms=TIMEOUT_MS)
    assert task.transaction is not None
    _decided(options, task)
    with open_session(options.connection) as session:
        session.abort(task.transaction)  # as the broker does when it times out
    with pytest.raises(KafkaEosOutputUnverifiableError, match=f"{topic} is compacted \\(cleanup.policy=compact\\)"):
        TwoPhaseCommitCoordinator(options, TIMEOUT_MS).prepare()


def test_a_straggler_of_a_decided_epoch_aborts_its_own_transaction(kafka: KafkaTestCluster) -> None:
    """A straggler that opens its transaction after the epoch's decision, and so after the sweep that
    followed it (the last epoch of a query or job has no next sweep), must not leave it open."""
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(0), [prepare(options, 0, ["zero"])])
    late = write_task(options, stream_epoch(0), [pa.record_batch([pa.array(["late"], pa.string())], names=["value"])],
                      task=TaskIdentity(0, 1, 98), transaction_timeout_ms=TIMEOUT_MS)
    assert late.transaction is None and late.records == ()
    assert open_transactions(kafka, options.prefix) == []
    assert committed_values(kafka, topic) == [b"zero"]
    assert kafka.offsets(topic, OffsetSpec.latest()) == kafka.offsets(topic, OffsetSpec.latest(), committed=False)


def test_a_job_retried_while_the_first_run_is_in_phase_2_is_written_once(kafka: KafkaTestCluster) -> None:
    """Two drivers on one prefix: the first run of a batch job decided and then stalled before phase 2;
    the orchestrator's retry (same writeId) takes over. The first run, superseded, aborts nothing."""
    topic = kafka.create_topic(2)
    options = sink_options(kafka, topic)
    job = EpochId.batch("2026-11-22")
    tasks = [prepare(options, p, [f"row-{p}"], job) for p in (0, 1)]
    first_run = TwoPhaseCommitCoordinator(options, TIMEOUT_MS, FaultHooks("after_decision"))
    with pytest.raises(InjectedFault):
        first_run.commit(job, tasks)
    assert open_transactions(kafka, options.prefix) == sorted(t.transaction.transactional_id for t in tasks if t.transaction)

    retry = TwoPhaseCommitCoordinator(options, TIMEOUT_MS)
    assert retry.prepare(job).verdict == Verdict.REPLAY  # the retry writes nothing: its data is committed
    with pytest.raises(KafkaEosEpochCommittedError, match="IS COMMITTED"):
        first_run.abort(job, tasks)  # Spark's abort of the first run, late: its job's failure says it is committed
    assert committed_values(kafka, topic) == [b"row-0", b"row-1"]
    assert open_transactions(kafka, options.prefix) == []
    last = KafkaDecisionLog(options).last(options.prefix)
    assert last is not None and (last.kind, last.epoch) == ("complete", job)


def coordinator_holder(options: WriterOptions) -> tuple[int, int]:
    """The producer id and epoch that hold the prefix's coordinator id, as the broker describes them."""
    coordinator_id = coordinator_transactional_id(options.prefix)
    with open_session(options.connection) as session:
        described = session.describe([coordinator_id])[coordinator_id]
    return described.producer_id, described.producer_epoch


def test_a_driver_keeps_its_coordinator_producer_from_commit_to_commit_while_it_holds_the_id(kafka: KafkaTestCluster) -> None:
    """The micro-batches of a query commit one after another in the driver's Python worker: the coordinator id is
    initialised once, not at every commit, while no other driver initialises it."""
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(0), [prepare(options, 0, ["a"])])
    holder = coordinator_holder(options)
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(1), [prepare(options, 0, ["b"], stream_epoch(1))])
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).prepare()
    assert coordinator_holder(options) == holder
    assert committed_values(kafka, topic) == [b"a", b"b"]


def test_a_driver_whose_coordinator_id_another_initialised_fences_again_before_it_commits(kafka: KafkaTestCluster) -> None:
    """Another driver of the prefix (a second copy of the job, an operator's recovery) initialised the coordinator
    id since this driver's last commit: the producer this driver kept is fenced, so it initialises the id anew,
    and its next decision commits under the new epoch."""
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(0), [prepare(options, 0, ["a"])])
    kept = coordinator_holder(options)
    kafka.producer(coordinator_transactional_id(options.prefix))  # the other driver's fence
    fenced_by_other = coordinator_holder(options)
    assert fenced_by_other[1] > kept[1]  # the fault fired: the kept producer no longer holds the id
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(1), [prepare(options, 0, ["b"], stream_epoch(1))])
    assert coordinator_holder(options)[1] > fenced_by_other[1]
    assert committed_values(kafka, topic) == [b"a", b"b"]
    assert open_transactions(kafka, options.prefix) == []


def test_the_coordinator_producer_a_driver_keeps_queues_nothing_while_it_waits(kafka: KafkaTestCluster) -> None:
    """Kept between micro-batches, the producer is not polled: anything librdkafka queued for it meanwhile (its
    statistics every interval) would pile up in the driver's Python worker until the next commit."""
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(0), [prepare(options, 0, ["a"])])
    key = (options.connection, options.decision_log_topic, coordinator_transactional_id(options.prefix))
    kept = decision_log_module._IDLE_COORDINATORS.take(key)
    assert kept is not None  # the commit kept it
    time.sleep(0.5)
    assert len(kept[0]) == 0


def test_a_task_that_prepares_after_the_jobs_abort_began_is_swept(kafka: KafkaTestCluster) -> None:
    """Spark calls abort() as soon as a task fails for good, while the job's other tasks are still being
    stopped: one whose write returned just then prepares after abort() began (seen in make test). abort()
    keeps sweeping for a grace period, so that straggler's transaction does not pin the LSO."""
    import threading

    from spark_kafka_eos._internal.write.coordinator import STRAGGLER_GRACE_S

    topic = kafka.create_topic(2)
    options = sink_options(kafka, topic)
    job = EpochId.batch("2026-11-25")
    failed_job = [prepare(options, 0, ["row-0"], job)]
    straggler: list[TaskCommit] = []

    def prepares_late() -> None:
        time.sleep(2.0)
        straggler.append(prepare(options, 1, ["row-1"], job))

    late = threading.Thread(target=prepares_late)
    late.start()
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).abort(job, failed_job)  # Spark's abort: the straggler's message never comes
    late.join()
    assert straggler and straggler[0].transaction is not None  # the fault fired: it prepared after abort() began
    assert STRAGGLER_GRACE_S > 2.0
    assert open_transactions(kafka, options.prefix) == []
    assert committed_values(kafka, topic) == []


def test_a_stream_commit_returns_with_its_completion_written_and_nothing_of_the_coordinator_open(kafka: KafkaTestCluster) -> None:
    """The Python worker that ran the commit may end right after it returns (pyspark ends its workers by os._exit or
    a signal: no atexit, no thread lives on), so nothing the commit started may still be running then."""
    topic = kafka.create_topic(2)
    options = sink_options(kafka, topic)
    coordinator = TwoPhaseCommitCoordinator(options, TIMEOUT_MS)
    coordinator.commit(stream_epoch(0), [prepare(options, 0, ["a"]), prepare(options, 1, ["b"])])
    last = KafkaDecisionLog(options).last(options.prefix)
    assert last is not None and (last.kind, last.epoch_id) == ("complete", str(stream_epoch(0)))
    assert committed_values(kafka, topic) == [b"a", b"b"]
    coordinator_id = coordinator_transactional_id(options.prefix)
    with open_session(options.connection) as session:
        assert session.describe([coordinator_id])[coordinator_id].state == TxnState.COMPLETE_COMMIT
    assert open_transactions(kafka, options.prefix) == []


def test_planning_does_not_fence_a_decision_whose_participants_are_all_committed(kafka: KafkaTestCluster) -> None:
    """The completion of the last micro-batch may still be on its way from the commit's process: planning the next
    one in another process must not fence that process's coordinator producer for it."""
    topic = kafka.create_topic(2)
    options = sink_options(kafka, topic)
    tasks = [prepare(options, 0, ["a"]), prepare(options, 1, ["b"])]
    decision_log = KafkaDecisionLog(options)
    decision_log.ensure_topic()
    decision_log.append(LogRecord("decision", options.prefix, str(stream_epoch(0)), tuple(
        Participant(t.transaction.transactional_id, t.transaction.producer_id, t.transaction.producer_epoch, t.spark_partition,
                    t.records, t.probe) for t in tasks if t.transaction is not None)))
    coordinator_id = coordinator_transactional_id(options.prefix)
    with open_session(options.connection) as session:
        for t in tasks:
            assert t.transaction is not None
            session.commit(t.transaction)  # phase 2 done; the completion not written yet
        holder = session.describe([coordinator_id])[coordinator_id]
        assert TwoPhaseCommitCoordinator(options, TIMEOUT_MS).prepare().verdict == Verdict.PROCEED
        after = session.describe([coordinator_id])[coordinator_id]
    assert (after.producer_id, after.producer_epoch) == (holder.producer_id, holder.producer_epoch)
    last = decision_log.last(options.prefix)
    assert last is not None and last.kind == "decision"
    assert committed_values(kafka, topic) == [b"a", b"b"]


def test_a_committed_participant_above_a_pinned_stable_offset_is_rolled_forward_not_reported_lost(kafka: KafkaTestCluster) -> None:
    """The operator model's find: a decided participant whose id moved on since (so only its probe can tell), while a
    dead attempt's open transaction of the prefix pins the sink's LSO below that probe. A read_committed reader cannot
    see the probe yet, committed or not: the recovery aborts what pins it (a sweep that proves ownership) and looks
    again, instead of reporting committed records as LOST."""
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    # Opened first, and left open for minutes: it pins the LSO below what follows (its timeout is no way out here).
    dead = write_task(options, stream_epoch(0), [pa.record_batch([pa.array(["dead"])], names=["value"])],
                      task=TaskIdentity(1, 0, 1), transaction_timeout_ms=300_000)
    task = prepare(options, 0, ["a"])
    assert task.transaction is not None and dead.transaction is not None and task.probe is not None
    decision_log = KafkaDecisionLog(options)
    decision_log.ensure_topic()
    decision_log.append(LogRecord("decision", options.prefix, str(stream_epoch(0)), (
        Participant(task.transaction.transactional_id, task.transaction.producer_id, task.transaction.producer_epoch,
                    task.spark_partition, task.records, task.probe, task.probe_digest),)))
    with open_session(options.connection) as session:
        session.commit(task.transaction)  # phase 2 done; no completion
        session.wait_settled([task.transaction.transactional_id])
        session.init_producer_id(task.transaction.transactional_id, TIMEOUT_MS)  # the id moved on: only the probe tells
        stable = kafka.offsets(topic, OffsetSpec.latest())[0]
        assert stable <= task.probe[2], "the fault fired: the dead attempt pins the LSO below the probe"
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).prepare()
    last = decision_log.last(options.prefix)
    assert last is not None and (last.kind, last.epoch_id) == ("complete", str(stream_epoch(0)))
    assert committed_values(kafka, topic) == [b"a"]
    assert open_transactions(kafka, options.prefix) == []


class _SharedGroup:
    """Prefixes of one sink, decision log and consumerGroup, copying ``records`` records of a one-partition source."""

    def __init__(self, kafka: KafkaTestCluster, records: int) -> None:
        self.source, self.sink = kafka.create_topic(1, "src"), kafka.create_topic(1, "sink")
        self.read = kafka.produce_plain(self.source, [Sent(0, None, f"in-{i}".encode()) for i in range(records)])
        self.tag, self.kafka = uuid.uuid4().hex[:8], kafka
        self.group = f"shared-{self.tag}"

    def sink_of(self, prefix: str) -> WriterOptions:
        return parse_writer_options({"kafka.bootstrap.servers": self.kafka.bootstrap_servers, "topic": self.sink,
                                     "consumerGroup": self.group, "transactional.id.prefix": f"{prefix}-{self.tag}",
                                     "decisionlogtopic": f"_decisions-{self.tag}"}, streaming=True)

    def copy(self, options: WriterOptions, epoch: EpochId, first: int = 0, count: int = 10) -> TaskCommit:
        """A task that copies source records ``first`` to ``first + count - 1``, with the source columns."""
        offsets = range(first, first + count)
        rows = pa.record_batch([pa.array([self.read[o].value for o in offsets], pa.binary()),
                                pa.array([self.source] * count, pa.string()), pa.array([0] * count, pa.int32()),
                                pa.array(offsets, pa.int64())],
                               names=["value", "source_topic", "source_partition", "source_offset"])
        return write_task(options, epoch, [rows], task=TaskIdentity(0, 0, 0), transaction_timeout_ms=TIMEOUT_MS)

    def forget(self) -> None:
        self.kafka.admin.delete_consumer_groups([self.group])[self.group].result(30)
        assert self.kafka.group_offsets(self.group, self.source) == {0: -1001}, "the fault fired: Kafka forgot the group"


def test_a_group_another_prefix_committed_then_kafka_forgot_is_refused_not_read_again(kafka: KafkaTestCluster) -> None:
    """The operator model's find: prefixes p and q commit one consumerGroup. p's decision moved it; Kafka then forgot
    the group's offsets (expiry, or a clean-up script); q, resuming from the group, read from earliest again. b0050cf
    compared only with the positions q itself remembered: the records p decided were written twice, silently."""
    shared = _SharedGroup(kafka, 10)
    p, q = shared.sink_of("p"), shared.sink_of("q")
    TwoPhaseCommitCoordinator(p, TIMEOUT_MS).commit(EpochId.stream("query-p", 0), [shared.copy(p, EpochId.stream("query-p", 0))])
    assert kafka.group_offsets(shared.group, shared.source) == {0: 10}
    shared.forget()

    epoch_q = EpochId.stream("query-q", 0)
    forgotten = r"has no committed offset .*from 0, committed to 10\)\. \(A partition this prefix never committed counts where another prefix"
    with pytest.raises(KafkaEosRunRefusedError, match=forgotten):
        TwoPhaseCommitCoordinator(q, TIMEOUT_MS).commit(epoch_q, [shared.copy(q, epoch_q)])
    assert committed_values(kafka, shared.sink) == sorted(s.value or b"" for s in shared.read)
    assert open_transactions(kafka, q.prefix) == []


def test_a_prefix_that_remembers_an_older_position_of_a_forgotten_group_is_refused_what_another_prefix_decided_since(
        kafka: KafkaTestCluster) -> None:
    """The operator model's find: q decided records 0-9 and remembers the group at 10; a query of prefix p resumed from
    the group and decided 10-19; Kafka then forgot the group; q's query goes on from its checkpoint over 10-19. q used
    to ask the other prefixes only for partitions it had never committed, passed on its own older position, and
    wrote 10-19 twice."""
    shared = _SharedGroup(kafka, 20)
    p, q = shared.sink_of("p"), shared.sink_of("q")
    TwoPhaseCommitCoordinator(q, TIMEOUT_MS).commit(EpochId.stream("query-q", 0), [shared.copy(q, EpochId.stream("query-q", 0))])
    TwoPhaseCommitCoordinator(p, TIMEOUT_MS).commit(EpochId.stream("query-p", 0), [shared.copy(p, EpochId.stream("query-p", 0), 10)])
    assert kafka.group_offsets(shared.group, shared.source) == {0: 20}
    shared.forget()

    epoch_q = EpochId.stream("query-q", 1)
    with pytest.raises(KafkaEosRunRefusedError, match=r"has no committed offset .*from 10, committed to 20\)"):
        TwoPhaseCommitCoordinator(q, TIMEOUT_MS).commit(epoch_q, [shared.copy(q, epoch_q, 10)])
    assert committed_values(kafka, shared.sink) == sorted(s.value or b"" for s in shared.read)
    assert open_transactions(kafka, q.prefix) == []
