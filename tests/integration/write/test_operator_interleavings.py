"""Operations that run against a live driver of the same prefix, on a real broker: ``kafka-eos reset`` while the
query decides a micro-batch, and a sweep (``recover``) while a newer driver decides the transactions it listed. The
interleavings are placed with the package's own seams (a CLI step, the decision log's append, the sweeper's session);
what counts is what a read_committed consumer sees after Spark's replay or the newer driver's recovery."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from spark_kafka_eos._internal.config.writer import WriterOptions
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord
from spark_kafka_eos._internal.ops import console as cli
from spark_kafka_eos._internal.txn.session import TransactionSession
from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
from spark_kafka_eos._internal.write.recovery import ABORTS_PER_PROOF
from spark_kafka_eos._internal.write.transactional_id import task_transactional_id
from spark_kafka_eos.errors import KafkaEosDecisionLogError, KafkaEosEpochAbortedError
from tests.harness.coordinator import TIMEOUT_MS, committed_values, prepare, sink_options, stream_epoch
from tests.harness.faults import FaultHooks, InjectedFault
from tests.harness.kafka import KafkaTestCluster
from tests.harness.pipeline import open_transactions
from tests.integration.write.test_cli import leave_open

pytestmark = pytest.mark.kafka


def _query_at_batch_0(kafka: KafkaTestCluster) -> tuple[str, WriterOptions]:
    """A sink topic and a prefix whose query decided (and completed) micro-batch 0."""
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(0), [prepare(options, 0, ["zero"])])
    return topic, options


def _decide_batch_1(options: WriterOptions) -> None:
    """The live query's driver commits micro-batch 1 (it fences the prefix's coordinator id first)."""
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(1), [prepare(options, 0, ["one"], stream_epoch(1))])


def _after_the_recovery(monkeypatch: pytest.MonkeyPatch, options: WriterOptions) -> None:
    """The driver decides once reset's recovery has fenced the prefix and read its last record."""
    recover = cli.recover_prefix

    def recover_then_the_driver_decides(*args: Any, **kwargs: Any) -> Any:
        done = recover(*args, **kwargs)
        _decide_batch_1(options)
        return done

    monkeypatch.setattr(cli, "recover_prefix", recover_then_the_driver_decides)


def _just_before_the_append(monkeypatch: pytest.MonkeyPatch, options: WriterOptions) -> None:
    """The driver decides right before reset appends its record."""
    append = KafkaDecisionLog.append

    def the_driver_decides_first(log: KafkaDecisionLog, record: LogRecord, *args: Any, **kwargs: Any) -> None:
        if record.kind == "reset":
            _decide_batch_1(options)
        append(log, record, *args, **kwargs)

    monkeypatch.setattr(KafkaDecisionLog, "append", the_driver_decides_first)


@pytest.mark.parametrize("interleave", [_after_the_recovery, _just_before_the_append], ids=["after-recovery", "before-append"])
def test_a_decision_taken_while_reset_runs_is_never_overwritten(
        kafka: KafkaTestCluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        interleave: Callable[[pytest.MonkeyPatch, WriterOptions], None]) -> None:
    """An operator resets the prefix of a query that still runs; it decides micro-batch 1 while the reset runs.
    A reset built from a read older than that decision would overwrite it, and Spark's replay of micro-batch 1
    (the driver crashed before its commit log) would then be judged against the reset's history: written twice."""
    topic, options = _query_at_batch_0(kafka)
    interleave(monkeypatch, options)

    code = cli.main(["reset", "--bootstrap-servers", kafka.bootstrap_servers, "--prefix", options.prefix,
                     "--decision-log-topic", options.decision_log_topic, "--yes"])
    captured = capsys.readouterr()
    monkeypatch.undo()
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(1), [prepare(options, 0, ["one"], stream_epoch(1))])

    assert committed_values(kafka, topic) == [b"one", b"zero"]
    last = KafkaDecisionLog(options).last(options.prefix)
    assert last is not None and last.kind != "reset" and last.epoch == stream_epoch(1)
    assert code != 0 and "stop" in captured.out + captured.err, captured
    assert open_transactions(kafka, options.prefix) == []


class _NewerDriverDecidesDuringTheSweep(TransactionSession):
    """The sweeper's own session, against the real broker: its first abort waits until a newer driver of the
    prefix has fenced it and decided; the sweep's other aborts wait for that too."""

    def __init__(self, bootstrap_servers: str, newer_driver: Callable[[], None]) -> None:
        super().__init__(bootstrap_servers, request_timeout_s=10)
        self._newer_driver: Callable[[], None] | None = newer_driver
        self._lock = threading.Lock()

    def init_producer_id(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            decide, self._newer_driver = self._newer_driver, None
            if decide is not None:
                decide()
        return super().init_producer_id(*args, **kwargs)


def test_an_older_sweeper_never_aborts_what_a_newer_driver_decided(kafka: KafkaTestCluster) -> None:
    """A sweep (here `kafka-eos recover`) lists the prefix's open transactions: a crashed run's, and the prepared
    participant of the query's next micro-batch (a stream's tasks open theirs before their driver fences). It proves
    it owns the prefix; then the query's driver fences it and decides, while the sweep is still aborting."""
    topic, options = _query_at_batch_0(kafka)
    crashed = [f"{options.prefix}-00000000-0-{p}-0" for p in range(ABORTS_PER_PROOF)]  # listed before the participant
    for txn_id in crashed:
        leave_open(kafka, topic, txn_id, partition=0, count=1)
    participant = prepare(options, 0, ["one"], stream_epoch(1))
    assert participant.transaction is not None and all(t < participant.transaction.transactional_id for t in crashed)
    assert participant.transaction.transactional_id == task_transactional_id(options.prefix, stream_epoch(1), 0, 0)

    def decide() -> None:
        with pytest.raises(InjectedFault):  # decided; its phase 2 has not run yet
            TwoPhaseCommitCoordinator(options, TIMEOUT_MS, FaultHooks("after_decision")).commit(stream_epoch(1), [participant])

    with _NewerDriverDecidesDuringTheSweep(kafka.bootstrap_servers, decide) as session:
        sweeper = TwoPhaseCommitCoordinator(options, TIMEOUT_MS, session_of=lambda _: session)
        with pytest.raises(KafkaEosDecisionLogError):
            sweeper.recover()

    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).prepare()  # the newer driver's next operation rolls its decision forward
    assert committed_values(kafka, topic) == [b"one", b"zero"]
    assert open_transactions(kafka, options.prefix) == []


def _refused_while_a_recovery_sweeps(kafka: KafkaTestCluster, topic: str, options: WriterOptions, epoch: EpochId,
                                     value: str) -> None:
    """Two crashed attempts' transactions left open; the query's participant of ``epoch`` prepared; ``kafka-eos
    recover`` sweeps, and the query's driver fences and decides during its first abort. The driver must refuse the
    epoch (a sweep announced its participant); Spark's replay is the caller's."""
    crashed = [f"{options.prefix}-00000000-0-{p}-0" for p in range(2)]
    for txn_id in crashed:
        leave_open(kafka, topic, txn_id, partition=0, count=1)
    participant = prepare(options, 0, [value], epoch)
    assert participant.transaction is not None
    outcomes: list[BaseException] = []

    def decide() -> None:
        try:
            TwoPhaseCommitCoordinator(options, TIMEOUT_MS, FaultHooks("after_decision")).commit(epoch, [participant])
        except (KafkaEosEpochAbortedError, InjectedFault) as err:
            outcomes.append(err)

    with _NewerDriverDecidesDuringTheSweep(kafka.bootstrap_servers, decide) as session:
        report = TwoPhaseCommitCoordinator(options, TIMEOUT_MS, session_of=lambda _: session).recover()
    assert set(crashed) <= set(report.aborted) and outcomes
    [refusal] = outcomes
    assert isinstance(refusal, KafkaEosEpochAbortedError), refusal
    assert "a sweep of the prefix" in str(refusal) and participant.transaction.transactional_id in str(refusal)


def test_a_newer_driver_never_decides_what_an_older_sweep_announced_it_aborts(kafka: KafkaTestCluster) -> None:
    """As above, but the query's prepared participant is in the sweep's first batch of aborts, after its one proof
    of ownership: the newer driver fences and would decide it (its phase 2 still to run) while the sweep is about to
    abort it. The proof named the batch, so the driver refuses the micro-batch before anything of it is visible, and
    Spark's replay writes it; a decision would have lost it."""
    topic, options = _query_at_batch_0(kafka)
    _refused_while_a_recovery_sweeps(kafka, topic, options, stream_epoch(1), "one")
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(1), [prepare(options, 0, ["one"], stream_epoch(1))])

    assert committed_values(kafka, topic) == [b"one", b"zero"]
    assert open_transactions(kafka, options.prefix) == []


def test_a_first_decision_never_takes_what_a_sweep_of_a_prefix_without_records_announced(kafka: KafkaTestCluster) -> None:
    """As above, on a prefix with no record yet (a query's first micro-batch, an earlier attempt's transactions left
    open): the sweep has no last record to append, so its proof commits an announcement of its aborts beside the
    prefix's records. The query's driver reads it once it fenced, and refuses the micro-batch it would have decided
    and then lost to the sweep's aborts; Spark's replay writes it, once."""
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    _refused_while_a_recovery_sweeps(kafka, topic, options, stream_epoch(0), "zero")
    assert KafkaDecisionLog(options).last(options.prefix) is None
    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(0), [prepare(options, 0, ["zero"])])

    assert committed_values(kafka, topic) == [b"zero"]
    assert open_transactions(kafka, options.prefix) == []


def test_a_sweep_of_a_prefix_without_records_leaves_it_without_records(kafka: KafkaTestCluster) -> None:
    """The announcement commits the coordinator id, which on a prefix with no record reads as a lost decision log:
    the announcement explains it, so the prefix's first query starts (and nothing of the sweep shows as a record)."""
    topic = kafka.create_topic(1)
    options = sink_options(kafka, topic)
    leave_open(kafka, topic, f"{options.prefix}-00000000-0-0-0", partition=0, count=1)
    assert TwoPhaseCommitCoordinator(options, TIMEOUT_MS).recover().aborted == [f"{options.prefix}-00000000-0-0-0"]
    with TransactionSession(kafka.bootstrap_servers) as session:
        coordinator = session.describe([f"{options.prefix}-coordinator"])[f"{options.prefix}-coordinator"]
    assert coordinator.state == "CompleteCommit"
    assert KafkaDecisionLog(options).last(options.prefix) is None and KafkaDecisionLog(options).records_since()[0] == []

    TwoPhaseCommitCoordinator(options, TIMEOUT_MS).commit(stream_epoch(0), [prepare(options, 0, ["zero"])])
    assert committed_values(kafka, topic) == [b"zero"]
