"""Driving the two-phase-commit coordinator without Spark: a sink's options on a fresh prefix and
decision log, tasks that prepare (produce, flush, leave open) as a Spark task does, and what a
read_committed consumer sees afterwards."""

from __future__ import annotations

import uuid

import pyarrow as pa

from spark_kafka_eos._internal.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log.records import EpochId
from spark_kafka_eos._internal.write.commit_message import TaskCommit
from spark_kafka_eos._internal.write.task_producer import TaskIdentity, write_task
from tests.harness.kafka import KafkaTestCluster

TIMEOUT_MS = 60_000
QUERY = "query-1"


def stream_epoch(batch_id: int, query: str = QUERY) -> EpochId:
    return EpochId.stream(query, batch_id)


def sink_options(kafka: KafkaTestCluster, topic: str) -> WriterOptions:
    """A streaming sink's options to ``topic`` with a prefix and a decision log topic of their own."""
    tag = uuid.uuid4().hex[:8]
    return parse_writer_options(
        {"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": topic, "transactional.id.prefix": f"coord-{tag}",
         "decisionlogtopic": f"_decisions-{tag}"},
        streaming=True,
    )


def prepare(options: WriterOptions, partition: int, values: list[str], epoch: EpochId | None = None) -> TaskCommit:
    """Spark partition ``partition``'s task: ``values`` written in an open transaction."""
    batch = pa.record_batch([pa.array(values, pa.string())], names=["value"])
    return write_task(options, epoch or stream_epoch(0), [batch], task=TaskIdentity(partition, 0, partition), transaction_timeout_ms=TIMEOUT_MS)


def committed_values(kafka: KafkaTestCluster, topic: str) -> list[bytes]:
    """What a read_committed consumer sees in ``topic``, sorted."""
    kafka.wait_until_stable(topic)
    return sorted(r.value or b"" for r in kafka.read_committed(topic))
