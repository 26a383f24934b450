"""Moving a running query from Spark's Kafka source and sink (``format("kafka")``) to ``kafka_eos`` on its
existing checkpoint, as docs/migrating.md says: what Spark's at-least-once sink wrote before the switch and what
kafka_eos writes after it, counted by an independent read_committed consumer, every record once.

Spark's own Kafka connector is the session's (``spark_kafka_source``: ``make test`` resolves it)."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import assert_stable
from tests.harness.pipeline import open_transactions

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PER_TRIGGER = 10
"""maxOffsetsPerTrigger: 30 records are three micro-batches of Spark's sink before the switch."""


def produce(kafka: KafkaTestCluster, topic: str, count: int, tag: str) -> list[bytes]:
    sent = kafka.produce_plain(topic, [Sent(i % 2, f"{tag}-k{i}".encode(), f"{tag}-{i}".encode()) for i in range(count)])
    return [record.value or b"" for record in sent]


def start(spark: SparkSession, kafka: KafkaTestCluster, source_format: str, sink_format: str, source: str, sink: str,
          checkpoint: Path, **sink_options: str) -> StreamingQuery:
    """The page's query: ``source`` copied to ``sink``, with the source and the sink of the formats named."""
    df = (spark.readStream.format(source_format)
          .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
          .option("subscribe", source)
          .option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", str(PER_TRIGGER))
          .load()
          .selectExpr("key", "value"))
    writer = (df.writeStream.format(sink_format)
              .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("topic", sink)
              .option("checkpointLocation", str(checkpoint)))
    for name, value in sink_options.items():
        writer = writer.option(name, value)
    return writer.start()


def run_until_idle(query: StreamingQuery) -> None:
    """Stop the query once it has read all there is: its last micro-batch is committed in the checkpoint."""
    try:
        query.processAllAvailable()
    finally:
        query.stop()


def batches(checkpoint: Path, log: str) -> list[int]:
    return sorted(int(f.name) for f in (checkpoint / log).iterdir() if f.name.isdigit())


def last_batch_committed(checkpoint: Path) -> bool:
    """The page's check before a switch: the last micro-batch of the offset log has its commit."""
    return batches(checkpoint, "offsets")[-1] == batches(checkpoint, "commits")[-1]


def written(kafka: KafkaTestCluster, sink: str) -> Counter[bytes]:
    kafka.wait_until_stable(sink)
    return Counter(r.value or b"" for r in kafka.read_committed(sink))


@pytest.mark.long  # three runs of a stream (~45 s): make test-all; the migrating page's blocks run in make test
def test_sparks_sink_switched_to_kafka_eos_on_its_checkpoint_goes_on_where_it_stopped(
        spark_kafka_source: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """Spark's sink writes three micro-batches and stops idle. kafka_eos on the same checkpoint is refused at
    micro-batch 3 (its prefix has no record of the query), nothing written; with allowNewPrefix=true once, it
    writes from micro-batch 3 on, and later runs need no option. Every record once."""
    spark = spark_kafka_source
    source, sink = kafka.create_topic(2, "src"), kafka.create_topic(2, "sink")
    checkpoint, prefix = tmp_path / "checkpoint", f"migrated-{uuid.uuid4().hex[:6]}"
    decision_log = f"_decisions-{uuid.uuid4().hex[:6]}"
    eos = {"transactional.id.prefix": prefix, "decisionLogTopic": decision_log}
    before = produce(kafka, source, 30, "before")
    run_until_idle(start(spark, kafka, "kafka", "kafka", source, sink, checkpoint))
    assert batches(checkpoint, "commits") == [0, 1, 2] and last_batch_committed(checkpoint)
    assert written(kafka, sink) == Counter(before)

    after = produce(kafka, source, 30, "after")
    with pytest.raises(StreamingQueryException,
                       match=f"'{prefix}' has no record of streaming query .* micro-batch 3.*allowNewPrefix"):
        run_until_idle(start(spark, kafka, "kafka", "kafka_eos", source, sink, checkpoint, **eos))
    assert written(kafka, sink) == Counter(before)

    run_until_idle(start(spark, kafka, "kafka", "kafka_eos", source, sink, checkpoint, allowNewPrefix="true", **eos))
    later = produce(kafka, source, 30, "later")
    run_until_idle(start(spark, kafka, "kafka", "kafka_eos", source, sink, checkpoint, **eos))  # the option removed

    assert written(kafka, sink) == Counter(before + after + later)
    assert batches(checkpoint, "commits") == list(range(9))
    assert open_transactions(kafka, prefix) == []
    assert_stable(kafka, sink, decision_log)


def test_the_kafka_eos_source_reads_on_from_the_offsets_sparks_source_left_in_the_checkpoint(
        spark_kafka_source: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """Source and sink switched in one restart: the kafka_eos reader takes Spark's Kafka source offsets
    (``{"topic":{"0":15,"1":15}}``) from the checkpoint's offset log and reads on from them, neither again
    from its startingOffsets nor skipping what arrived while the query was stopped."""
    spark = spark_kafka_source
    source, sink = kafka.create_topic(2, "src"), kafka.create_topic(2, "sink")
    checkpoint, prefix = tmp_path / "checkpoint", f"migrated-{uuid.uuid4().hex[:6]}"
    decision_log = f"_decisions-{uuid.uuid4().hex[:6]}"
    before = produce(kafka, source, 30, "before")
    run_until_idle(start(spark, kafka, "kafka", "kafka", source, sink, checkpoint))
    assert last_batch_committed(checkpoint)

    after = produce(kafka, source, 30, "after")
    run_until_idle(start(spark, kafka, "kafka_eos", "kafka_eos", source, sink, checkpoint, allowNewPrefix="true",
                         **{"transactional.id.prefix": prefix, "decisionLogTopic": decision_log}))

    assert written(kafka, sink) == Counter(before + after)
    assert batches(checkpoint, "commits") == list(range(6))
    assert open_transactions(kafka, prefix) == []
    assert_stable(kafka, sink, decision_log)


def test_a_micro_batch_sparks_sink_wrote_but_did_not_commit_is_written_again_after_the_switch(
        spark_kafka_source: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """Why the page checks the checkpoint before the switch: Spark's sink wrote micro-batch 2 but its commit is
    not in the checkpoint (a crash between the two), so Spark replays it, and kafka_eos, which has no record of
    what Spark's sink wrote, writes its 10 records again, as Spark's own sink would on a restart."""
    spark = spark_kafka_source
    source, sink = kafka.create_topic(2, "src"), kafka.create_topic(2, "sink")
    checkpoint = tmp_path / "checkpoint"
    before = produce(kafka, source, 30, "before")
    run_until_idle(start(spark, kafka, "kafka", "kafka", source, sink, checkpoint))
    for name in ("2", ".2.crc"):  # the crash: micro-batch 2 written, not committed
        (checkpoint / "commits" / name).unlink()
    assert not last_batch_committed(checkpoint)

    run_until_idle(start(spark, kafka, "kafka", "kafka_eos", source, sink, checkpoint, allowNewPrefix="true",
                         **{"transactional.id.prefix": f"migrated-{uuid.uuid4().hex[:6]}"}))

    out = written(kafka, sink)
    assert set(out) == set(before)
    assert sorted(value for value, count in out.items() if count == 2) == sorted(before[20:])
    assert sum(out.values()) == len(before) + PER_TRIGGER
