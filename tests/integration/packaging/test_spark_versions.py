"""The Spark-version tier: in a virtualenv per pyspark version, that pyspark installed first (as a
cluster's runtime provides it), then the package with a plain ``pip install``, which must keep it.
pyspark 4.3 is the main suite's. On 4.2, 4.1 (long tier) and 4.0: a batch read, an exactly-once batch write, an
AvailableNow stream into the exactly-once sink, killed after a decision and restarted with more records
waiting (with Spark's AvailableNow wrapper off, then on); each counted by an independent read_committed
consumer. The stream has maxOffsetsPerTrigger on 4.2; 4.1 and 4.0 refuse that option with a clear error
(their engine asks a Python source for offsets without the trigger's start or kind) and read each
AvailableNow run in one micro-batch."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from tests.harness.compat import OLDER_SPARKS, PROJECT, CompatVenv, compat_venv
from tests.harness.faults import MARKERS_ENV, clear_fired, fired
from tests.harness.kafka import KafkaTestCluster, Sent

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def job(venv: CompatVenv, tmp_path: Path, *args: str) -> tuple[int, dict[str, object] | None, str]:
    done = venv.run("-m", "tests.harness.compat_job", *args, cwd=tmp_path,
                    env={"PYTHONPATH": str(PROJECT), MARKERS_ENV: os.environ[MARKERS_ENV]})
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, json.loads(lines[-1]) if lines else None, done.stderr[-4000:]


def source_with_an_aborted_transaction(kafka: KafkaTestCluster, count: int) -> tuple[str, list[bytes]]:
    source = kafka.create_topic(2, "compat-src")
    sent = kafka.produce_plain(source, [Sent(i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(count)])
    kafka.open_transaction(source, [Sent(0, b"gone", b"aborted")]).abort()
    return source, sorted(s.value or b"" for s in sent)


def values(kafka: KafkaTestCluster, topic: str) -> list[bytes]:
    kafka.wait_until_stable(topic)
    return sorted(r.value or b"" for r in kafka.read_committed(topic))


# (pyspark, Python, maxOffsetsPerTrigger of the stream or "" for none: Spark 4.2 brought read limits).
# make test runs the oldest (4.0: Databricks 17.3 LTS), whose stream reader and writer are the legacy ones. 4.1,
# which runs the stream as 4.0 does, and 4.2, which runs it as the main suite's 4.3 does, are in the long tier
# (make test's budget: each version is a few minutes).
VERSIONS = [pytest.param(version, python, "30" if version >= "4.2" else "", id=f"{version}-py{python}",
                         marks=[] if version.startswith("4.0.") else [pytest.mark.long])
            for version, python in OLDER_SPARKS]


@pytest.mark.parametrize(("version", "python", "max_offsets"), VERSIONS)
def test_a_plain_install_keeps_pyspark_and_reads_and_writes_exactly_once(kafka: KafkaTestCluster, tmp_path: Path, version: str,
                                                                        python: str, max_offsets: str) -> None:
    venv = compat_venv(version, python)
    assert venv.pyspark_after_install == version  # pip kept the runtime's pyspark
    source, sent = source_with_an_aborted_transaction(kafka, 90)
    batch_sink, stream_sink = kafka.create_topic(2, "compat-batch"), kafka.create_topic(2, "compat-stream")
    checkpoint = str(tmp_path / "checkpoint")

    clear_fired()
    status, result, stderr = job(venv, tmp_path, "first-run", kafka.bootstrap_servers, source, batch_sink, f"compat-{uuid.uuid4().hex[:6]}",
                                 stream_sink, checkpoint, max_offsets)
    assert result is not None, stderr
    assert (result["pyspark"], result["python"], result["java"], result["read"]) == (version, python, "17", 90)
    assert values(kafka, batch_sink) == sent
    if not max_offsets:
        assert f"Option 'maxOffsetsPerTrigger': needs Spark 4.2 or later; this is Spark {version}" in str(result["refusal"]), result
    assert status != 0 and len(fired("after_decision:kill-driver")) == 1, stderr  # the stream's driver died after a decision

    more = kafka.produce_plain(source, [Sent(i % 2, None, f"w{i}".encode()) for i in range(40)])  # arrived while it was down
    status, result, stderr = job(venv, tmp_path, "restart", kafka.bootstrap_servers, source, stream_sink, checkpoint, max_offsets)
    assert status == 0 and result is not None, stderr
    if max_offsets:  # Spark 4.2+: AvailableNow in micro-batches of at most maxOffsetsPerTrigger, to the end
        assert all(rows <= int(max_offsets) for rows in result["rows"]) and sum(result["rows"]) == 130, result  # type: ignore[union-attr]
    else:
        # Spark 4.0/4.1 run AvailableNow as Trigger.Once without their wrapper: the interrupted batch, then
        # stop; the next run reads on (with the wrapper, whose target comes before the restart's replay).
        assert (result["rows"], result["rows_with_wrapper"]) == ([90], [40]), result
    assert values(kafka, stream_sink) == sorted(sent + [s.value or b"" for s in more])  # exactly once
