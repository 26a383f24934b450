"""Reader options whose promise is about a default or a log line (README, "Reading: options"):
``maxTriggerDelay``'s 15-minute default, a ``progressGroup`` commit that fails, and the warning of
``failOnDataLoss=false``.

The log lines come from the stream reader, which Spark runs in a Python process of the driver's
JVM: the queries here run in a driver of their own (``tests.harness.stream_job``), whose whole stderr
the test reads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import types
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql.streaming.datasource import ReadMinRows

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read import reader as reader_module
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.stream import positions, stream_reader

pytestmark = pytest.mark.kafka

PROJECT = Path(__file__).resolve().parents[3]
FIFTEEN_MINUTES_MS = 15 * 60 * 1000


def run_stream_job(options: dict[str, str], checkpoint: Path) -> tuple[dict[str, object], str]:
    """Run ``tests.harness.stream_job`` with ``options``: its JSON answer and its whole stderr."""
    done = subprocess.run([sys.executable, "-m", "tests.harness.stream_job", json.dumps(options), str(checkpoint)],
                          capture_output=True, text=True, timeout=600, cwd=PROJECT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


# -- maxTriggerDelay --------------------------------------------------------------------------

def test_max_trigger_delay_defaults_to_15_minutes() -> None:
    options = parse_reader_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t", "minoffsetspertrigger": "5"}, streaming=True)
    assert options.max_trigger_delay_ms == FIFTEEN_MINUTES_MS
    assert parse_reader_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t", "maxtriggerdelay": "15m"},
                                streaming=True).max_trigger_delay_ms == FIFTEEN_MINUTES_MS


def test_below_min_offsets_a_stream_waits_15_minutes_by_default(kafka: KafkaTestCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``minOffsetsPerTrigger`` and no ``maxTriggerDelay``, a backlog below the minimum is held
    back until 15 minutes after the last batch, not a moment less. The reader's clock is moved on
    (the broker and everything else keep the real one)."""
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, b"first")])
    shift_s = 0.0
    monkeypatch.setattr(reader_module, "time", types.SimpleNamespace(monotonic=lambda: time.monotonic() + shift_s, sleep=time.sleep))
    reader = stream_reader(kafka, subscribe=topic, minOffsetsPerTrigger="10")
    start = reader.initialOffset()
    first = reader.latestOffset(start, ReadMinRows(10))  # the first trigger of a run never waits
    assert first[topic] == {"0": 1}
    position = {topic: first[topic]}
    kafka.produce_plain(topic, [Sent(0, None, b"second")])
    shift_s = FIFTEEN_MINUTES_MS / 1000 - 60  # a minute short (whatever the calls themselves take)
    assert reader.latestOffset(position, ReadMinRows(10)) == position
    shift_s = FIFTEEN_MINUTES_MS / 1000 + 1
    assert positions(reader.latestOffset(position, ReadMinRows(10))) == {topic: {"0": 2}}


# -- progressGroup --------------------------------------------------------------------------

@pytest.fixture
def group_in_use(kafka: KafkaTestCluster) -> Iterator[str]:
    """A consumer group with an active member (a consumer subscribed to a topic of its own): the broker
    refuses offset commits to it from anyone outside the group's current generation."""
    group, topic = f"busy-{uuid.uuid4().hex[:8]}", kafka.create_topic(1, prefix="member")
    member = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    member.subscribe([topic])
    deadline = time.monotonic() + 60
    while not member.assignment():
        assert time.monotonic() < deadline, "the member never joined its group"
        member.poll(0.2)
    try:
        yield group
    finally:
        member.close()


def test_a_failed_progress_commit_is_logged_and_the_query_goes_on(kafka: KafkaTestCluster, group_in_use: str, tmp_path: Path) -> None:
    topic = kafka.create_topic(2)
    sent = kafka.produce_plain(topic, [Sent(i % 2, None, f"v{i}".encode()) for i in range(10)])
    answer, stderr = run_stream_job(
        {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "progressGroup": group_in_use}, tmp_path / "checkpoint"
    )
    assert answer["error"] is None
    assert answer["values"] == sorted((s.value or b"").decode() for s in sent)
    logged = f"kafka_eos could not commit the stream's progress to group '{group_in_use}': Commit failed: Broker: Unknown member"
    assert logged in stderr, stderr[-3000:]
    assert kafka.group_offsets(group_in_use, topic) == {0: -1001, 1: -1001}, "the commit really failed"


# -- failOnDataLoss=false ---------------------------------------------------------------------

@pytest.mark.long  # make test checks the rows of failOnDataLoss=false in test_reader_differential.py
def test_fail_on_data_loss_false_logs_a_warning_and_reads_on(kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """Records deleted (deleteRecords, as retention does) below where the query stands: a warning naming
    the partition and the lost offsets, then the records that are left."""
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, f"v{i}".encode()) for i in range(10)])
    kafka.admin.delete_records([TopicPartition(topic, 0, 6)])[TopicPartition(topic, 0, 6)].result(30)
    options = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "failOnDataLoss": "false",
               "startingOffsets": json.dumps({topic: {"0": 2}})}
    answer, stderr = run_stream_job(options, tmp_path / "checkpoint")
    assert answer["error"] is None
    assert answer["values"] == [f"v{i}" for i in range(6, 10)]
    warning = f"{topic}-0: offsets 2 to 5 were deleted (retention or deleteRecords) before they were read"
    assert warning in stderr and "Skipping them and reading on from offset 6 (failOnDataLoss=false)." in stderr, stderr[-3000:]
