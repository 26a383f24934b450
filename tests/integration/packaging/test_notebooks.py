"""Every Databricks notebook in notebooks/ runs end to end against the test broker, with the
test session's Spark as its ``spark`` and a ``dbutils`` stand-in for its widgets."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.notebook_runner import is_notebook, run_notebook

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

NOTEBOOKS = Path(__file__).resolve().parents[3] / "notebooks"
DATABRICKS_NOTEBOOKS = sorted(p for p in NOTEBOOKS.glob("*.py") if is_notebook(p))


def test_the_notebooks_are_databricks_notebooks() -> None:
    assert [p.name for p in DATABRICKS_NOTEBOOKS] == ["backfill.py", "eos_pipeline.py", "read_committed.py"]
    for path in DATABRICKS_NOTEBOOKS:
        source = path.read_text()
        cells = source.split("# COMMAND ----------")
        assert any(c.strip().startswith("# MAGIC %pip install spark-kafka-eos") for c in cells[:3]), path
        assert ".master(" not in source and "argparse" not in source and "SparkSession.builder" not in source, path


def test_read_committed_notebook(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    namespace = run_notebook(NOTEBOOKS / "read_committed.py", spark, {"bootstrap_servers": kafka.bootstrap_servers})
    assert len(namespace["values"]) == 13  # 6 committed + 7 plain, none behind the open transaction
    independent = [r.value for r in kafka.read_committed(namespace["TOPIC"])]
    assert len(independent) == 17 and not any(b"ABORTED" in v for v in independent)  # with 2 Schema Registry values


def test_eos_pipeline_notebook_runs_twice_exactly_once(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    source, sink = kafka.create_topic(3, prefix="src"), kafka.create_topic(3, prefix="sink")
    sent = kafka.produce_plain(source, [Sent(i % 3, None, b"order %d" % i) for i in range(300)])
    widgets = {
        "bootstrap_servers": kafka.bootstrap_servers, "source": source, "sink": sink,
        "checkpoint": str(tmp_path / "checkpoint"), "consumer_group": f"g-{uuid.uuid4().hex[:8]}",
        "max_offsets_per_trigger": "100",
    }
    first = run_notebook(NOTEBOOKS / "eos_pipeline.py", spark, widgets)
    assert first["processed"] == 300
    sent += kafka.produce_plain(source, [Sent(i % 3, None, b"order %d" % i) for i in range(300, 350)])
    again = run_notebook(NOTEBOOKS / "eos_pipeline.py", spark, widgets)  # a scheduled re-run: only the new records
    assert again["processed"] == 50
    out = sorted(r.value for r in kafka.read_committed(sink))
    assert out == sorted(b"processed:" + s.value for s in sent)


@pytest.mark.long
def test_make_demo_is_exactly_once_through_its_driver_crash(kafka: KafkaTestCluster) -> None:
    """``make demo`` (``notebooks/demo.py``), against the session's broker instead of an embedded one."""
    done = subprocess.run([sys.executable, str(NOTEBOOKS / "demo.py")], cwd=NOTEBOOKS.parent, capture_output=True, text=True,
                          env={**os.environ, "KAFKA_EOS_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    crash = re.search(r"driver gone \(exit code (-?\d+)\)", done.stdout)
    assert crash is not None and crash.group(1) != "0", done.stdout  # run 1 died at its fault
    assert "0 duplicates, 0 lost (input: 3000)" in done.stdout, done.stdout
    assert done.stdout.rstrip().endswith(">> OK: exactly once through a driver crash."), done.stdout
