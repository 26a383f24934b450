"""The inspect / recover / reset command line against a real broker, run in-process through
``spark_kafka_eos.cli.main``. Open transactions are made the way a crashed task leaves them (flushed,
producer dropped without close); an independent read_committed consumer says what became visible."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from spark_kafka_eos._internal.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord, Participant
from spark_kafka_eos._internal.txn.session import TransactionSession, TxnState
from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
from spark_kafka_eos._internal.write.task_producer import TaskIdentity, write_task
from spark_kafka_eos.cli import main
from spark_kafka_eos.errors import KafkaEosRunRefusedError
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import open_transactions_by_kafka

NEW_QUERY = EpochId.stream("a-new-query", 0)

pytestmark = pytest.mark.kafka
PROJECT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Prefix:
    """A fresh transactional id prefix with its own decision log topic."""

    kafka: KafkaTestCluster
    name: str
    log_topic: str

    def argv(self, command: str, *extra: str) -> list[str]:
        return [command, "--bootstrap-servers", self.kafka.bootstrap_servers, "--prefix", self.name,
                "--decision-log-topic", self.log_topic, *extra]

    def options(self, topic: str | None = None) -> WriterOptions:
        options = {"kafka.bootstrap.servers": self.kafka.bootstrap_servers, "transactional.id.prefix": self.name,
                   "decisionlogtopic": self.log_topic}
        return parse_writer_options({**options, **({"topic": topic} if topic else {})}, streaming=False)


@pytest.fixture
def prefix(kafka: KafkaTestCluster) -> Prefix:
    return Prefix(kafka, f"cli-{uuid.uuid4().hex[:10]}", f"_decisions-{uuid.uuid4().hex[:10]}")


@pytest.fixture(scope="module")
def session(kafka: KafkaTestCluster) -> Iterator[TransactionSession]:
    with TransactionSession(kafka.bootstrap_servers, request_timeout_s=10) as txn_session:
        yield txn_session


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    """Exit code and stdout of one CLI call (stderr must stay empty unless it failed)."""
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2 or captured.err == "", captured.err
    return code, captured.out


def leave_open(kafka: KafkaTestCluster, topic: str, transactional_id: str, partition: int, count: int) -> None:
    """Begin, produce and flush ``count`` records, then drop the producer without close(): the
    transaction stays open on its coordinator, as a crashed task's does."""
    records = [Sent(partition, None, f"lingering-{i}".encode()) for i in range(count)]
    txn = kafka.open_transaction(topic, records, transactional_id)
    del txn
    gc.collect()


def prepared_participant(options: WriterOptions, rows: pa.RecordBatch, epoch: EpochId, attempt: int, task_attempt_id: int) -> Participant:
    """A task's transaction, written and flushed by the package's own task writer and left open, as a participant of a
    decision: what a driver that died after deciding leaves behind."""
    task = write_task(options, epoch, iter([rows]), TaskIdentity(spark_partition=0, attempt_number=attempt, task_attempt_id=task_attempt_id))
    assert task.transaction is not None
    txn = task.transaction
    return Participant(txn.transactional_id, txn.producer_id, txn.producer_epoch, 0, task.records)


def ongoing_ids(session: TransactionSession, prefix: str) -> list[str]:
    listed = session.list_transactions(state_filters=[TxnState.ONGOING.value])
    return sorted(t.transactional_id for t in listed if t.transactional_id.startswith(prefix + "-"))


def offsets_line(out: str, topic: str, partition: int) -> tuple[int, int, bool]:
    """(last stable offset, high watermark, flagged pinned) as inspect printed them."""
    match = re.search(rf"^topic {re.escape(topic)} partition {partition}: last stable offset (\d+), "
                      rf"high watermark (\d+), (PINNED|stable)", out, re.MULTILINE)
    assert match is not None, out
    return int(match.group(1)), int(match.group(2)), match.group(3) == "PINNED"


def test_inspect_of_a_fresh_prefix_shows_no_record_and_nothing_open(capsys: pytest.CaptureFixture[str], prefix: Prefix) -> None:
    code, out = run(capsys, prefix.argv("inspect"))

    assert code == 0
    assert f"decision log topic {prefix.log_topic} (does not exist)" in out
    assert "last record: none" in out.splitlines()
    assert "open transactions: none" in out.splitlines()


def test_recover_aborts_a_lingering_transaction_that_pins_the_lso(
    capsys: pytest.CaptureFixture[str], kafka: KafkaTestCluster, session: TransactionSession, prefix: Prefix
) -> None:
    topic, elsewhere = kafka.create_topic(partitions=2), kafka.create_topic(partitions=1)
    leave_open(kafka, topic, f"{prefix.name}-0123abcd-0-3-1", partition=1, count=5)
    other = kafka.open_transaction(elsewhere, [Sent(0, None, b"not-ours")], f"{prefix.name}-other")

    code, out = run(capsys, prefix.argv("inspect", "--topic", topic))

    assert code == 0
    assert "open transactions: 1" in out.splitlines()
    assert re.search(rf"^  {prefix.name}-0123abcd-0-3-1: Ongoing, producer \d+ epoch \d+, started .* ago, timeout .*, "
                     rf"partitions {topic}-1$", out, re.MULTILINE), out
    assert f"{prefix.name}-other" not in out
    assert offsets_line(out, topic, 1) == (0, 5, True)
    assert offsets_line(out, topic, 0) == (0, 0, False)

    code, out = run(capsys, prefix.argv("recover"))

    assert code == 0
    assert f"aborted 1 open transaction(s) of prefix {prefix.name}: {prefix.name}-0123abcd-0-3-1" in out
    kafka.wait_until_stable(topic)
    code, out = run(capsys, prefix.argv("inspect", "--topic", topic))
    assert code == 0 and "open transactions: none" in out.splitlines()
    last_stable, high_watermark, pinned = offsets_line(out, topic, 1)
    assert last_stable == high_watermark > 5 and not pinned
    assert kafka.read_committed(topic) == []
    assert ongoing_ids(session, prefix.name) == [f"{prefix.name}-other"]  # not of the prefix: left alone
    assert run(capsys, prefix.argv("recover"))[0] == 1  # nothing left to do
    other.abort()


def test_recover_rolls_an_open_decided_participant_forward(
    capsys: pytest.CaptureFixture[str], kafka: KafkaTestCluster, session: TransactionSession, prefix: Prefix
) -> None:
    topic = kafka.create_topic(partitions=2)
    options = prefix.options(topic)
    values = [f"decided-{i}".encode() for i in range(30)]
    rows = pa.RecordBatch.from_pydict({"value": values}, schema=pa.schema([("value", pa.binary())]))
    participant = prepared_participant(options, rows, EpochId.batch("cli"), attempt=1, task_attempt_id=42)
    decision_log = KafkaDecisionLog(options)
    decision_log.ensure_topic()
    decision_log.append(LogRecord("decision", prefix.name, "stream:q:7", (participant,), "cli-group", (("in", 0, 13),)))

    code, out = run(capsys, prefix.argv("inspect"))

    assert code == 0
    assert "last record: decision stream:q:7, written " in out
    assert (f"  participant {participant.transactional_id}: spark partition 0, producer {participant.producer_id} epoch {participant.producer_epoch}, "
            f"{participant.describe_output()}; now Ongoing") in out.splitlines()
    assert "  consumer group cli-group: in-0 -> 13" in out.splitlines()
    assert re.search(rf"^  {participant.transactional_id}: Ongoing, producer {participant.producer_id} epoch {participant.producer_epoch},", out, re.MULTILINE)
    assert kafka.read_committed(topic) == []

    code, out = run(capsys, prefix.argv("recover"))

    assert code == 0
    assert f"rolled forward decision stream:q:7: committed 1 participant transaction(s): {participant.transactional_id}" in out
    assert f"no open transactions of prefix {prefix.name}" in out
    kafka.wait_until_stable(topic)
    assert sorted(r.value or b"" for r in kafka.read_committed(topic)) == sorted(values)  # each exactly once
    last = decision_log.last(prefix.name)
    assert last is not None and (last.kind, last.epoch_id) == ("complete", "stream:q:7")
    code, out = run(capsys, prefix.argv("inspect"))
    assert "last record: complete stream:q:7, written " in out and "open transactions: none" in out.splitlines()
    assert ongoing_ids(session, prefix.name) == []


def test_reset_needs_yes_then_lets_a_new_query_start_from_batch_zero(capsys: pytest.CaptureFixture[str], prefix: Prefix) -> None:
    options = prefix.options()
    decision_log = KafkaDecisionLog(options)
    decision_log.ensure_topic()
    decision_log.append(LogRecord("complete", prefix.name, "stream:q:7"))
    before = decision_log.last(prefix.name)
    coordinator = TwoPhaseCommitCoordinator(options, transaction_timeout_ms=60_000)
    with pytest.raises(KafkaEosRunRefusedError, match="owned by another streaming query: its last record is complete of micro-batch 7 of streaming query q"):
        coordinator.commit(NEW_QUERY, [])

    code, out = run(capsys, prefix.argv("reset"))

    assert code == 1
    assert "re-run with --yes" in out
    assert decision_log.last(prefix.name) == before

    code, out = run(capsys, prefix.argv("reset", "--yes"))

    assert code == 0
    assert "appended reset record reset:" in out
    last = decision_log.last(prefix.name)
    assert last is not None and last.kind == "reset" and last.epoch_id.startswith("reset:") and last.batch_id is None
    assert last.previous_epoch_id == "stream:q:7"
    assert run(capsys, prefix.argv("reset", "--yes"))[0] == 1  # already reset: nothing to do
    coordinator.commit(NEW_QUERY, [])  # no longer refused
    claimed = decision_log.last(prefix.name)  # the new query's first micro-batch, empty, is recorded: it owns the prefix
    assert claimed is not None and claimed.epoch_id == str(NEW_QUERY) and claimed.kind == "complete"


def test_reset_goes_past_a_lost_participant_only_when_told(capsys: pytest.CaptureFixture[str], prefix: Prefix) -> None:
    decision_log = KafkaDecisionLog(prefix.options())
    decision_log.ensure_topic()
    never_prepared = Participant(f"{prefix.name}-0123abcd-1-0-0", 4711, 0, 0, (("out", 0, 3),))  # the coordinator knows no such id
    decision_log.append(LogRecord("decision", prefix.name, "stream:q:7", (never_prepared,)))

    assert main(prefix.argv("reset", "--yes")) == 2
    assert "LOST" in capsys.readouterr().err
    last = decision_log.last(prefix.name)
    assert last is not None and last.kind == "decision"

    code, out = run(capsys, prefix.argv("reset", "--yes", "--accept-data-loss"))

    assert code == 0
    assert f"DATA LOSS accepted (--accept-data-loss): Decision stream:q:7 of prefix '{prefix.name}'" in out
    last = decision_log.last(prefix.name)
    assert last is not None and last.kind == "reset"


def test_secrets_are_never_printed(capsys: pytest.CaptureFixture[str], prefix: Prefix) -> None:
    secret = f"s3cret-{uuid.uuid4().hex}"

    code, out = run(capsys, prefix.argv("inspect", "--kafka", "sasl.username=someone", "--kafka", f"sasl.password={secret}"))

    assert code == 0
    assert secret not in out and "'sasl.password': '[redacted]'" in out


@pytest.mark.parametrize("extra", [["--kafka", "bootstrap.servers=elsewhere:9092"], ["--kafka", "no-equals-sign"],
                                   ["--topic", "no-such-topic-anywhere"]])
def test_errors_are_one_line_on_stderr_with_exit_code_2(capsys: pytest.CaptureFixture[str], prefix: Prefix, extra: list[str]) -> None:
    code = main(prefix.argv("inspect", *extra))

    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err and "error:" in err[-1]
    assert all(line.startswith(("usage:", " ")) for line in err[:-1])  # argparse prints its usage first


def run_command(command: list[str], argv: list[str]) -> tuple[int, str]:
    """Exit code and stdout of the CLI run as its own process, with this checkout's package (stderr must
    stay empty unless it failed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([*command, *argv], capture_output=True, text=True, timeout=300, cwd=PROJECT, env=env)
    assert done.returncode == 2 or done.stderr == "", done.stderr
    return done.returncode, done.stdout


@pytest.mark.parametrize("command", [[sys.executable, "-m", "spark_kafka_eos.cli"], [str(Path(sys.executable).parent / "kafka-eos")]],
                         ids=["python -m spark_kafka_eos.cli", "kafka-eos"])
def test_python_m_and_the_kafka_eos_command_recover_a_lingering_transaction(
    kafka: KafkaTestCluster, prefix: Prefix, command: list[str]
) -> None:
    """The module run with ``python -m`` and the installed command, each a process of its own, on a real
    lingering transaction: inspect shows it, recover aborts it (Kafka's own tool says nothing of the prefix
    is open), a second recover has nothing to do."""
    topic = kafka.create_topic(partitions=1)
    lingering = f"{prefix.name}-0123abcd-0-0-0"
    leave_open(kafka, topic, lingering, partition=0, count=3)
    assert open_transactions_by_kafka(kafka.bootstrap_servers, prefix.name + "-") == [lingering]

    code, out = run_command(command, ["--help"])
    assert code == 0 and out.startswith("usage: kafka-eos ")

    code, out = run_command(command, prefix.argv("inspect", "--topic", topic))
    assert code == 0
    assert "open transactions: 1" in out.splitlines() and f"  {lingering}: Ongoing" in out
    assert offsets_line(out, topic, 0) == (0, 3, True)

    code, out = run_command(command, prefix.argv("recover"))
    assert code == 0
    assert f"aborted 1 open transaction(s) of prefix {prefix.name}: {lingering}" in out
    assert open_transactions_by_kafka(kafka.bootstrap_servers, prefix.name + "-") == []
    kafka.wait_until_stable(topic)
    assert kafka.read_committed(topic) == []
    assert run_command(command, prefix.argv("recover"))[0] == 1  # nothing left to do
