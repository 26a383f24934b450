"""kafka_eos through Spark Connect (Databricks shared clusters and serverless run Connect).

A batch read, a batch write, and a streaming read into the exactly-once sink, in a Connect
session of a process of its own; the outcome is judged by the independent consumer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import OffsetSpec

from tests.harness.faults import MARKERS_ENV, fired
from tests.harness.kafka import KafkaTestCluster, Sent

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PROJECT = Path(__file__).resolve().parents[2]


def run_connect_job(kafka: KafkaTestCluster, *args: str, expect_ok: bool = True) -> dict[str, object] | None:
    """What the job printed; with ``expect_ok=False``, None when it died without printing."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "tests.harness.connect_job", kafka.bootstrap_servers, *args],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=600,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not expect_ok:
        return json.loads(lines[-1]) if done.returncode == 0 and lines else None
    assert done.returncode == 0 and lines, f"the Connect job failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return json.loads(lines[-1])


def test_reads_and_exactly_once_writes_through_spark_connect(kafka: KafkaTestCluster, tmp_path: Path) -> None:
    source, batch_sink, stream_sink = kafka.create_topic(2), kafka.create_topic(2), kafka.create_topic(2)
    prefix, checkpoint = f"connect-{uuid.uuid4().hex[:8]}", str(tmp_path / "checkpoint")
    first = [Sent(i % 2, b"k%d" % i, b"v%d" % i) for i in range(10)]
    kafka.produce_plain(source, first)
    aborted = kafka.open_transaction(source, [Sent(0, None, b"aborted")])
    aborted.abort()

    seen = run_connect_job(kafka, source, batch_sink, stream_sink, checkpoint, prefix)
    assert seen["session"] == "pyspark.sql.connect.session", seen  # really a Connect session
    assert seen["batch_read"] == 10 and seen["stream_error"] is None, seen
    # Batch writes need mode("append"): overwrite is refused by the sink, Connect's default save mode
    # (ErrorIfExists) by Spark; neither wrote anything (the sink holds the append's records once).
    refused = seen["refused_modes"]
    assert isinstance(refused, dict) and refused["overwrite"] and refused["default"], seen
    assert "is overwrite; a Kafka topic can only be appended to. Fix: use .mode('append')." in refused["overwrite"], refused
    assert 'The data source "kafka_eos" cannot be written in the "ErrorIfExists" mode' in refused["default"], refused
    assert sorted(r.value for r in kafka.read_committed(batch_sink)) == sorted(s.value for s in first)
    assert sorted(r.value for r in kafka.read_committed(stream_sink)) == sorted(s.value for s in first)

    # The same query again, from its checkpoint: only the new records, exactly once.
    more = [Sent(i % 2, None, b"w%d" % i) for i in range(5)]
    kafka.produce_plain(source, more)
    again = run_connect_job(kafka, source, kafka.create_topic(1), stream_sink, checkpoint, prefix)
    assert again["stream_error"] is None and again["stream_batches"] and min(again["stream_batches"]) >= 1, again
    assert sorted(r.value for r in kafka.read_committed(stream_sink)) == sorted(s.value for s in first + more)
    assert kafka.offsets(stream_sink, OffsetSpec.latest()) == kafka.offsets(stream_sink, OffsetSpec.latest(), committed=False)


def test_a_connect_server_killed_after_its_decision_recovers_exactly_once(
    kafka: KafkaTestCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Connect server's JVM (the driver) is SIGKILLed right after the stream's first decision,
    before phase 2. A new Connect session on the same checkpoint rolls the decision forward."""
    source, batch_sink, stream_sink = kafka.create_topic(2), kafka.create_topic(1), kafka.create_topic(2)
    prefix, checkpoint = f"connect-{uuid.uuid4().hex[:8]}", str(tmp_path / "checkpoint")
    sent = [Sent(i % 2, None, b"v%d" % i) for i in range(10)]
    kafka.produce_plain(source, sent)
    (tmp_path / "markers").mkdir()
    monkeypatch.setenv(MARKERS_ENV, str(tmp_path / "markers"))  # inherited by the job and the server's workers
    crashed = run_connect_job(kafka, source, batch_sink, stream_sink, checkpoint, prefix, "after_decision:kill-driver", expect_ok=False)
    assert crashed is None and len(fired("after_decision:kill-driver")) == 1
    assert kafka.read_committed(stream_sink) == []  # decided, but phase 2 never ran: nothing visible yet
    assert kafka.offsets(stream_sink, OffsetSpec.latest(), committed=False) != kafka.offsets(stream_sink, OffsetSpec.latest())

    again = run_connect_job(kafka, source, kafka.create_topic(1), stream_sink, checkpoint, prefix)
    assert again["stream_error"] is None, again
    assert sorted(r.value for r in kafka.read_committed(stream_sink)) == sorted(s.value for s in sent)
    assert kafka.offsets(stream_sink, OffsetSpec.latest()) == kafka.offsets(stream_sink, OffsetSpec.latest(), committed=False)
