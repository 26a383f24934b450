"""``kafka-eos list``, ``--json`` and ``kafka-eos exporter`` against a real broker: prefixes made the way the sink
leaves them (a decision whose participant is still open, a lingering transaction of a crashed task), judged by
what Kafka says (the transactions it lists, its offsets) and by a scrape of the exporter over HTTP."""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from prometheus_client.parser import text_string_to_metric_families

from spark_kafka_eos._internal.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.records import EpochId, EpochInput, LogRecord
from spark_kafka_eos.cli import main
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import open_transactions_by_kafka
from tests.integration.write.test_cli import leave_open, prepared_participant

PROMTOOL = Path(__file__).resolve().parents[3] / ".cache" / "promtool" / "promtool"
"""Prometheus's promtool, built by make from the Go module proxy."""

pytestmark = pytest.mark.kafka
RECORDS = 30


@dataclass(frozen=True)
class Log:
    """Two prefixes in one fresh decision log: ``decided`` holds a decision whose participant is still open (a
    driver died after deciding); ``lingering`` is complete but for a crashed task's open transaction."""

    kafka: KafkaTestCluster
    topic: str
    decided: str
    lingering: str
    sink: str
    lingering_id: str

    def argv(self, command: str, *extra: str) -> list[str]:
        return [command, "--bootstrap-servers", self.kafka.bootstrap_servers, "--decision-log-topic", self.topic, *extra]

    def options(self, prefix: str) -> WriterOptions:
        return parse_writer_options({"kafka.bootstrap.servers": self.kafka.bootstrap_servers, "transactional.id.prefix": prefix,
                                     "decisionlogtopic": self.topic, "topic": self.sink}, streaming=False)


@pytest.fixture
def decision_log(kafka: KafkaTestCluster) -> Log:
    tag = uuid.uuid4().hex[:8]
    sink = kafka.create_topic(partitions=2)
    log = Log(kafka, f"_decisions-{tag}", f"ops-decided-{tag}", f"ops-lingering-{tag}", sink, f"ops-lingering-{tag}-0123abcd-0-1-0")
    options = log.options(log.decided)
    rows = pa.RecordBatch.from_pydict({"value": [f"decided-{i}".encode() for i in range(RECORDS)], "partition": [0] * RECORDS},
                                      schema=pa.schema([("value", pa.binary()), ("partition", pa.int32())]))
    participant = prepared_participant(options, rows, EpochId.batch("ops"), attempt=0, task_attempt_id=7)
    writer = KafkaDecisionLog(options)
    writer.ensure_topic()
    writer.append(LogRecord("decision", log.decided, "stream:query-a:7", (participant,)))
    KafkaDecisionLog(log.options(log.lingering)).append(LogRecord("complete", log.lingering, "batch:backfill-2026-11-01"))
    leave_open(kafka, sink, log.lingering_id, partition=1, count=5)
    return log


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, object]]:
    code = main(argv)
    out = capsys.readouterr().out
    document = json.loads(out)
    assert document["exit_code"] == code
    return code, document


def test_list_shows_every_prefix_its_state_open_transactions_and_pinned_partitions(
    capsys: pytest.CaptureFixture[str], decision_log: Log
) -> None:
    code, document = run_json(capsys, decision_log.argv("list", "--json"))

    assert code == 0 and document["command"] == "list" and document["decision_log_exists"] is True
    by_prefix = {p["prefix"]: p for p in document["prefixes"]}  # type: ignore[attr-defined, index]
    assert sorted(by_prefix) == sorted([decision_log.decided, decision_log.lingering])
    decided, lingering = by_prefix[decision_log.decided], by_prefix[decision_log.lingering]
    assert (decided["state"], decided["owner"], decided["last_epoch"]) == ("decided-not-finished", "query query-a", "stream:query-a:7")
    [participant] = decided["open_transactions"]
    assert participant["transactional_id"].startswith(decision_log.decided + "-")
    assert 0 <= participant["age_ms"] < participant["timeout_ms"] and participant["headroom_ms"] > 0
    assert decided["sink_partitions"] == [{"topic": decision_log.sink, "partition": 0, "last_stable_offset": 0,
                                           "high_watermark": RECORDS, "lso_lag": RECORDS}]
    assert (lingering["state"], lingering["owner"]) == ("complete", "writeId backfill-2026-11-01")
    assert [t["transactional_id"] for t in lingering["open_transactions"]] == [decision_log.lingering_id]
    assert lingering["oldest_open_age_ms"] is not None and lingering["oldest_open_headroom_ms"] > 0
    assert open_transactions_by_kafka(decision_log.kafka.bootstrap_servers, decision_log.lingering + "-") == [decision_log.lingering_id]

    assert main(decision_log.argv("list")) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0] == f"2 prefix(es) in decision log topic {decision_log.topic}"
    assert any(line.startswith(f"{decision_log.decided}: decided-not-finished, query query-a, last epoch stream:query-a:7")
               and f"sink LSO lag {RECORDS} ({decision_log.sink}-0)" in line for line in text), text

    code, recovered = run_json(capsys, [*decision_log.argv("recover", "--prefix", decision_log.decided, "--json")])
    assert code == 0 and recovered["rolled_forward"] == "stream:query-a:7"
    assert recovered["committed_participants"] == [participant["transactional_id"]] and recovered["aborted"] == []
    deadline = time.monotonic() + 30
    while True:  # the commit's markers land a moment after recover returns
        code, document = run_json(capsys, decision_log.argv("list", "--json"))
        decided = {p["prefix"]: p for p in document["prefixes"]}[decision_log.decided]  # type: ignore[attr-defined, index]
        if decided["sink_partitions"][0]["lso_lag"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (decided["state"], decided["open_transactions"]) == ("complete", [])
    assert decided["sink_partitions"][0]["lso_lag"] == 0


def test_every_command_answers_in_json_with_its_exit_code(capsys: pytest.CaptureFixture[str], decision_log: Log) -> None:
    code, inspected = run_json(capsys, decision_log.argv("inspect", "--prefix", decision_log.lingering, "--topic", decision_log.sink, "--json"))
    assert code == 0 and inspected["last_record"]["kind"] == "complete"  # type: ignore[index]
    assert [t["transactional_id"] for t in inspected["open_transactions"]] == [decision_log.lingering_id]  # type: ignore[attr-defined]
    assert {(p["partition"], p["pinned"]) for p in inspected["partitions"]} == {(0, True), (1, True)}  # type: ignore[attr-defined]

    code, plan = run_json(capsys, decision_log.argv("reset", "--prefix", decision_log.lingering, "--json"))
    assert code == 1 and plan["reset_record"] is None and "Nothing was changed" in plan["plan"][-1]  # type: ignore[index]

    code, lag = run_json(capsys, ["lag", "--bootstrap-servers", decision_log.kafka.bootstrap_servers, "--group", "g-none",
                                  "--topic", decision_log.sink, "--json"])
    assert code == 0 and lag["total_lag"] == 0 and [p["group_offset"] for p in lag["partitions"]] == [None, None]  # type: ignore[attr-defined]

    code, missing = run_json(capsys, ["list", "--bootstrap-servers", decision_log.kafka.bootstrap_servers,
                                      "--decision-log-topic", f"_no-log-{uuid.uuid4().hex[:6]}", "--json"])
    assert code == 1 and missing["decision_log_exists"] is False and missing["prefixes"] == []

    code = main(["inspect", "--bootstrap-servers", "127.0.0.1:1", "--prefix", "p", "--json", "--kafka", "socket.timeout.ms=2000",
                 "--kafka", "sasl.password=hunter2"])
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert code == 2 and document["exit_code"] == 2 and document["error"] and "hunter2" not in captured.out + captured.err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape_text(port: int, deadline_s: float = 60.0) -> str:
    """One scrape of /metrics that read the cluster (a first read slower than the scrape timeout answers up 0, and
    the next scrape has its figures); waits for the exporter to listen."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
                text = str(response.read().decode())
            if "kafka_eos_exporter_up 1.0" in text:
                return text
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"no scrape of port {port} read the cluster within {deadline_s} s")
        time.sleep(0.2)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and labels."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return samples(scrape_text(port))


def promtool_check_metrics(text: str) -> None:
    """Prometheus's own linter of an exposition (``promtool check metrics``): nothing to say."""
    assert PROMTOOL.exists(), f"{PROMTOOL} is missing: make test builds it (Go module proxy)"
    checked = subprocess.run([str(PROMTOOL), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and not checked.stdout.strip() and not checked.stderr.strip(), checked.stdout + checked.stderr


def test_the_exporter_serves_open_transactions_pinned_partitions_held_back_sources_and_group_lag_over_http(
    capsys: pytest.CaptureFixture[str], decision_log: Log
) -> None:
    kafka = decision_log.kafka
    source, group = kafka.create_topic(partitions=1), f"ops-group-{uuid.uuid4().hex[:6]}"
    kafka.produce_plain(source, [Sent(0, None, f"in-{i}".encode()) for i in range(5)])
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    consumer.commit(offsets=[KafkaTopicPartition(source, 0, 2)], asynchronous=False)
    consumer.close()
    sink_group, grouped = f"ops-sink-group-{uuid.uuid4().hex[:6]}", f"ops-grouped-{uuid.uuid4().hex[:6]}"
    # A prefix whose decisions commit a consumerGroup's offsets: the exporter finds the group in the log.
    KafkaDecisionLog(decision_log.options(grouped)).append(
        LogRecord("complete", grouped, "stream:query-g:0", consumer_group=sink_group, offsets=((source, 0, 4),),
                  input=EpochInput(4, digest="1" * 32)), {(source, 0): 4})
    # A transaction left open on the partition that prefix consumes: its stream is held back there.
    holding = kafka.open_transaction(source, [Sent(0, None, b"held-1"), Sent(0, None, b"held-2")])
    port = free_port()
    exporter = subprocess.Popen(
        [sys.executable, "-m", "spark_kafka_eos.cli", *decision_log.argv("exporter", "--port", str(port), "--group", group)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        text = scrape_text(port)
        promtool_check_metrics(text)
        metrics = samples(text)
        decided, lingering = (("prefix", decision_log.decided),), (("prefix", decision_log.lingering),)
        pinned = (("partition", "0"), ("prefix", decision_log.decided), ("topic", decision_log.sink))
        assert metrics[("kafka_eos_exporter_up", ())] == 1
        assert metrics[("kafka_eos_prefix_open_transactions", decided)] == 1
        assert metrics[("kafka_eos_prefix_decided_not_finished", decided)] == 1
        assert metrics[("kafka_eos_sink_partition_lso_lag", pinned)] == RECORDS
        assert metrics[("kafka_eos_prefix_open_transactions", lingering)] == 1
        age = metrics[("kafka_eos_prefix_oldest_open_transaction_age_seconds", lingering)]
        headroom = metrics[("kafka_eos_prefix_oldest_open_transaction_headroom_seconds", lingering)]
        timeout = metrics[("kafka_eos_prefix_oldest_open_transaction_timeout_seconds", lingering)]
        assert 0 <= age < timeout and abs(age + headroom - timeout) < 1e-6
        assert metrics[("kafka_eos_group_lag", (("group", group), ("partition", "0"), ("topic", source)))] == 3
        assert metrics[("kafka_eos_group_lag", (("group", sink_group), ("partition", "0"), ("topic", source)))] == 1
        assert metrics[("kafka_eos_group_sum_lag", (("group", sink_group),))] == 1
        held_back = (("partition", "0"), ("prefix", grouped), ("topic", source))
        assert metrics[("kafka_eos_source_partition_lso_lag", held_back)] == 2
        assert metrics[("kafka_eos_source_partition_last_stable_offset", held_back)] == 5
        assert metrics[("kafka_eos_source_partition_high_watermark", held_back)] == 7
        assert metrics[("kafka_eos_prefix_state", (("prefix", decision_log.decided), ("state", "decided-not-finished")))] == 1
        assert metrics[("kafka_eos_prefix_state", (("prefix", decision_log.decided), ("state", "complete")))] == 0
        # The stream's replays are proven by its rows' digest alone (its offset log was out of the sink's reach).
        assert metrics[("kafka_eos_prefix_replay_proof", (("prefix", grouped), ("proof", "digest")))] == 1
        assert metrics[("kafka_eos_prefix_replay_proof", (("prefix", grouped), ("proof", "offset_log")))] == 0
        assert metrics[("kafka_eos_build_info", (("version", importlib.metadata.version("spark-kafka-eos")),))] == 1
        # No label whose value changes with each epoch or owner: a prefix's series stay the same series.
        assert not {label for _, labels in metrics for label, _ in labels} & {"owner", "last_epoch", "epoch", "query_id", "write_id"}

        assert main(decision_log.argv("recover", "--prefix", decision_log.decided)) == 0
        assert main(decision_log.argv("recover", "--prefix", decision_log.lingering)) == 0
        capsys.readouterr()
        kafka.wait_until_stable(decision_log.sink)
        metrics = scrape(port)
        assert metrics[("kafka_eos_prefix_open_transactions", decided)] == 0
        assert metrics[("kafka_eos_prefix_open_transactions", lingering)] == 0
        assert metrics[("kafka_eos_prefix_decided_not_finished", decided)] == 0
        assert metrics[("kafka_eos_sink_partition_lso_lag", pinned)] == 0
        assert ("kafka_eos_prefix_oldest_open_transaction_headroom_seconds", lingering) not in metrics
    finally:
        holding.abort()
        exporter.send_signal(signal.SIGINT)
        out, err = exporter.communicate(timeout=30)
    assert exporter.returncode == 0, err
    assert f"serving kafka_eos metrics of {decision_log.topic} on http://127.0.0.1:{port}/metrics" in out


def test_an_exporter_that_cannot_reach_the_cluster_answers_within_its_scrape_timeout() -> None:
    """Served: each scrape answers within --scrape-timeout with kafka_eos_exporter_up 0 (Prometheus gives up a scrape
    after 10 s), the read that hangs goes on alone; --once exits 2. The exposition passes promtool."""
    port = free_port()
    exporter = subprocess.Popen(
        [sys.executable, "-m", "spark_kafka_eos.cli", "exporter", "--bootstrap-servers", "127.0.0.1:1", "--port", str(port),
         "--scrape-timeout", "2", "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(2):
            deadline, answered = time.monotonic() + 60, None
            while answered is None:
                try:
                    began = time.monotonic()
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
                        answered, took = str(response.read().decode()), time.monotonic() - began
                except OSError:
                    assert time.monotonic() < deadline, "the exporter never listened"
                    time.sleep(0.2)
            assert "kafka_eos_exporter_up 0.0" in answered and took < 9, (took, answered)
            promtool_check_metrics(answered)
    finally:
        exporter.send_signal(signal.SIGINT)
        exporter.communicate(timeout=30)
    once = subprocess.run([sys.executable, "-m", "spark_kafka_eos.cli", "exporter", "--bootstrap-servers", "127.0.0.1:1",
                           "--once", "--scrape-timeout", "2"], capture_output=True, text=True, timeout=120)
    assert once.returncode == 2 and "kafka_eos_exporter_up 0.0" in once.stdout, once.stdout + once.stderr
    assert once.stderr.startswith("error: the scrape could not read the cluster") and len(once.stderr.splitlines()) == 1, once.stderr
