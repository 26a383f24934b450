"""kafka_eos through Spark Connect (Databricks shared clusters and serverless run Connect).

A batch read, a batch write, and a streaming read into the exactly-once sink whose driver (the
Connect server) is killed after a decision and restarted, in Connect sessions of processes of their
own; the outcome is judged by the independent consumer.
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

from tests.harness.compat import OLDER_SPARKS, CompatVenv, compat_venv
from tests.harness.faults import MARKERS_ENV, fired
from tests.harness.kafka import KafkaTestCluster, Sent

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PROJECT = Path(__file__).resolve().parents[3]


def run_connect_job(kafka: KafkaTestCluster, venv: CompatVenv | None, *args: str) -> tuple[int, list[dict[str, object]], str]:
    """The job's exit status, the JSON lines it printed, and the end of its output. ``venv``: the
    virtualenv of an older pyspark to run it in, or None for this session's pyspark."""
    if venv is None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run([sys.executable, "-m", "tests.harness.connect_job", kafka.bootstrap_servers, *args],
                              cwd=PROJECT, env=env, capture_output=True, text=True, timeout=600)
    else:
        done = venv.run("-m", "tests.harness.connect_job", kafka.bootstrap_servers, *args, cwd=PROJECT,
                        env={"PYTHONPATH": str(PROJECT), MARKERS_ENV: os.environ[MARKERS_ENV]})
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    # The stream's error first: the JVM stack trace after its message would push the message out of a tail.
    stream_error = str(lines[-1].get("stream_error"))[:1500] if lines else "no line printed"
    return done.returncode, lines, f"stream_error: {stream_error}\n---\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"


def test_reads_writes_and_a_server_killed_after_its_decision_through_spark_connect(
    kafka: KafkaTestCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch read and an exactly-once batch write in a Connect session; then its stream's driver, the
    Connect server's JVM, is SIGKILLed right after the first decision, before phase 2. A new Connect
    session on the same checkpoint rolls the decision forward and reads the records produced since,
    exactly once."""
    reads_writes_and_a_server_killed_after_its_decision(kafka, tmp_path, monkeypatch, None)


@pytest.mark.long
@pytest.mark.parametrize(("version", "python"), OLDER_SPARKS, ids=[f"{v}-py{p}" for v, p in OLDER_SPARKS])
def test_the_same_through_spark_connect_of_older_sparks(kafka: KafkaTestCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       version: str, python: str) -> None:
    """The same on pyspark 4.2, 4.1 and 4.0 (the Spark-version tier's virtualenvs): their Connect
    servers run the package's older-Spark reader and writer."""
    venv = compat_venv(version, python)
    assert venv.pyspark_after_install == version
    reads_writes_and_a_server_killed_after_its_decision(kafka, tmp_path, monkeypatch, venv)


def reads_writes_and_a_server_killed_after_its_decision(kafka: KafkaTestCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        venv: CompatVenv | None) -> None:
    source, batch_sink, stream_sink = kafka.create_topic(2), kafka.create_topic(2), kafka.create_topic(2)
    prefix, checkpoint = f"connect-{uuid.uuid4().hex[:8]}", str(tmp_path / "checkpoint")
    first = [Sent(i % 2, b"k%d" % i, b"v%d" % i) for i in range(10)]
    kafka.produce_plain(source, first)
    kafka.open_transaction(source, [Sent(0, None, b"aborted")]).abort()
    (tmp_path / "markers").mkdir()
    monkeypatch.setenv(MARKERS_ENV, str(tmp_path / "markers"))  # inherited by the job and the server's workers

    status, lines, output = run_connect_job(kafka, venv, source, batch_sink, stream_sink, checkpoint, prefix, "after_decision:kill-driver")
    assert status != 0 and len(fired("after_decision:kill-driver")) == 1, output
    assert len(lines) == 1, output  # the batch part's line; the stream's never came
    seen = lines[0]
    assert seen["session"] == "pyspark.sql.connect.session", seen  # really a Connect session
    assert seen["batch_read"] == 10, seen
    # Batch writes need mode("append"): overwrite is refused by the sink, Connect's default save mode
    # (ErrorIfExists) by Spark; neither wrote anything (the sink holds the append's records once).
    refused = seen["refused_modes"]
    assert isinstance(refused, dict) and refused["overwrite"] and refused["default"], seen
    assert "is overwrite; a Kafka topic can only be appended to. Fix: use .mode('append')." in refused["overwrite"], refused
    assert 'The data source "kafka_eos" cannot be written in the "ErrorIfExists" mode' in refused["default"], refused
    assert sorted(r.value for r in kafka.read_committed(batch_sink)) == sorted(s.value for s in first)
    assert kafka.read_committed(stream_sink) == []  # decided, but phase 2 never ran: nothing visible yet
    assert kafka.offsets(stream_sink, OffsetSpec.latest(), committed=False) != kafka.offsets(stream_sink, OffsetSpec.latest())

    more = [Sent(i % 2, None, b"w%d" % i) for i in range(5)]
    kafka.produce_plain(source, more)
    status, lines, output = run_connect_job(kafka, venv, source, kafka.create_topic(1), stream_sink, checkpoint, prefix)
    assert status == 0 and lines[-1]["stream_error"] is None and lines[-1]["stream_batches"], output
    assert sorted(r.value for r in kafka.read_committed(stream_sink)) == sorted(s.value for s in first + more)
    assert kafka.offsets(stream_sink, OffsetSpec.latest()) == kafka.offsets(stream_sink, OffsetSpec.latest(), committed=False)
