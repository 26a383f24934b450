"""Spark with executors in JVMs of their own (``local-cluster[2,1,1024]``, as on a cluster): options, the
writer object and commit messages really cross process boundaries, and an executor JVM killed in the
middle of a task's write is replaced and its task retried, with the output exactly once."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import OffsetSpec

from spark_kafka_eos._internal.config.writer import derived_prefix
from tests.harness.faults import clear_fired, fired
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import assert_stable, open_transactions_by_kafka
from tests.harness.notebook_runner import notebook_command

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
PROJECT = Path(__file__).resolve().parents[3]
SEPARATE_EXECUTORS = "local-cluster[2,1,1024]"


def test_an_executor_jvm_killed_mid_write_is_replaced_and_the_pipeline_is_exactly_once(kafka: KafkaTestCluster, tmp_path: Path) -> None:
    source, sink = kafka.create_topic(3, prefix="src"), kafka.create_topic(3, prefix="sink")
    sent = kafka.produce_plain(source, [Sent(i % 3, f"k{i}".encode(), f"order {i}".encode()) for i in range(1500)])
    group, checkpoint = f"g-{sink}", str(tmp_path / "checkpoint")
    job = notebook_command(PROJECT / "notebooks" / "eos_pipeline.py", bootstrap_servers=kafka.bootstrap_servers, source=source,
                           sink=sink, checkpoint=checkpoint, consumer_group=group, max_offsets_per_trigger="1500")
    clear_fired()
    # Small Arrow batches, so that the first attempt of partition 0 is killed after writing its first one.
    done = subprocess.run(job + ["--master", SEPARATE_EXECUTORS, "--fail-at", "task_write:kill-executor",
                                 "--conf", "spark.sql.execution.arrow.maxRecordsPerBatch=100"],
                          capture_output=True, text=True, timeout=600, cwd=PROJECT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(fired("task_write:kill-executor")) == 1, done.stderr[-3000:]
    assert "Lost executor" in done.stderr, "the killed JVM was an executor of its own"

    kafka.wait_until_stable(sink)
    out = kafka.read_committed(sink)
    assert sorted(r.value or b"" for r in out) == sorted(b"processed:" + (s.value or b"") for s in sent)
    assert open_transactions_by_kafka(kafka.bootstrap_servers, derived_prefix(checkpoint) + "-") == []
    assert_stable(kafka, sink, "_kafka_eos_decisions")
    assert kafka.group_offsets(group, source) == kafka.offsets(source, OffsetSpec.latest())
