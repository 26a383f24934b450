"""The differential suite on a three-broker cluster whose leader epochs are above 0, where production runs.

A one-broker test cluster keeps every partition's leader epoch at 0; here the topics are written, then every
node is SIGKILLed and restarted in turn (a rolling restart: leadership moves, each partition's leader epoch
goes up) before anything is read. The batch reads of ``test_reader_differential`` then run through Spark's own
source (the oracle) and through kafka_eos on each engine; and a stream's micro-batch that latestOffset planned
from a re-created topic's earliest offset is replayed after a restart, its records counted by an independent
read_committed consumer (Spark's source never reads those records: it plans from its old position).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.harness.kafka import KafkaTestCluster
from tests.harness.spark import batch_read
from tests.harness.stream import parquet_values, stream
from tests.integration.read.test_reader_differential import (
    CASES,
    COMMON,
    DATA_LOSS_CASES,
    Topics,
    assert_identical,
    fill,
    make_topics,
    read_options,
    run_both,
)

if TYPE_CHECKING:
    from tests.harness.local_cluster import LocalCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.long]  # a three-broker cluster, rolling restart: make test-all

# The data-loss cases whose topic lives on (a re-created topic starts again at leader epoch 0: issue 49 item 1,
# test_reader_cluster_consumers).
KEPT_TOPIC_CASES = [name for name in DATA_LOSS_CASES if "re-created" not in name and "moved back" not in name]


def leader_epochs(kafka: KafkaTestCluster, topic: str) -> dict[int, int]:
    """Each partition's leader epoch, as its leader reports it with its latest offset."""
    tps = [TopicPartition(topic, p) for p in kafka.partitions_of(topic)]
    futures = kafka.admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=30)
    return {tp.partition: int(future.result(30).leader_epoch or 0) for tp, future in futures.items()}


@pytest.fixture(scope="module")
def rolled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Topics, dict[str, tuple[str, list[bytes]]]]]:
    """A three-broker cluster with the differential suite's topics written (and a topic of each data-loss case
    with its records before the change), then every node SIGKILLed and restarted in turn; every partition of
    those topics has a leader epoch above 0."""
    from tests.harness.local_cluster import LocalCluster

    cluster = LocalCluster(tmp_path_factory.mktemp("rolled")).start()
    try:
        kafka = cluster.kafka
        topics = make_topics(kafka)
        data_loss = {}
        for name in KEPT_TOPIC_CASES:
            case = DATA_LOSS_CASES[name]
            topic = kafka.create_topic(case.partitions, prefix="loss")
            data_loss[name] = (topic, fill(kafka, topic, case.before, "old"))
        for node in cluster.node_ids:
            cluster.kill(node)
            cluster.restart(node)
        for topic in (topics.txn, topics.plain, *(t for t, _ in data_loss.values())):
            epochs = leader_epochs(kafka, topic)
            assert epochs and min(epochs.values()) > 0, f"leader epochs of {topic} still at 0 after the rolling restart: {epochs}"
        yield cluster, topics, data_loss
    finally:
        for node_id in cluster.node_ids:
            if cluster.running(node_id):
                cluster.kill(node_id)


def test_batch_reads_after_a_rolling_restart_return_the_same_rows(
    spark_kafka_source: SparkSession, rolled: tuple[LocalCluster, Topics, dict[str, tuple[str, list[bytes]]]], read_engine: str
) -> None:
    """Every option set of the one-broker differential test, on each engine, against Spark's own source."""
    cluster, topics, _ = rolled
    kafka = cluster.kafka
    for case in CASES:
        options = {**COMMON, **read_options(topics)[case]}
        oracle = batch_read(spark_kafka_source, kafka, "kafka", **options)
        ours = batch_read(spark_kafka_source, kafka, "kafka_eos", **options, readEngine=read_engine)
        assert assert_identical(oracle, ours) > 0, case
    options = {**COMMON, "subscribe": topics.plain, "includeHeaders": "true"}
    oracle = batch_read(spark_kafka_source, kafka, "kafka", **options)
    ours = batch_read(spark_kafka_source, kafka, "kafka_eos", **options, readEngine=read_engine)
    assert assert_identical(oracle, ours, headers=True) == 12


def test_a_replayed_micro_batch_of_a_moved_back_partition_reads_it_from_earliest(
    spark_kafka_source: SparkSession, rolled: tuple[LocalCluster, Topics, dict[str, tuple[str, list[bytes]]]], tmp_path: Path, read_engine: str
) -> None:
    """Issue 49 item 3. A stream (failOnDataLoss=false) reads 5 records of each of 3 partitions; the topic is
    re-created and 3 records go to each partition: latestOffset finds each log (ending at 3) below the position
    (5), restarts it at its earliest offset and plans batch 1 = [0, 3), whose end Spark writes to the checkpoint;
    the query dies in batch 1, before it commits. 10 more records each lift the logs to 13, past the old position.
    The restarted query replays batch 1 from [5 -> 3]: it must read [0, 3) again from earliest, not take it for a
    first batch resolved anew and read nothing (b0050cf: offsets 0 to 2 of each partition never arrived)."""
    spark, kafka = spark_kafka_source, rolled[0].kafka
    topic = kafka.create_topic(3, prefix="moved-back")
    old = fill(kafka, topic, {p: 5 for p in range(3)}, "old")
    checkpoint = tmp_path / "checkpoint"
    seen: list[tuple[int, bytes]] = []

    def run(on_batch: Callable[[DataFrame, int], None]) -> StreamingQuery:
        df = stream(spark, kafka, subscribe=topic, failOnDataLoss="false", readEngine=read_engine, **COMMON)
        writer = df.writeStream.foreachBatch(on_batch).option("checkpointLocation", str(checkpoint))
        return writer.trigger(availableNow=True).start()

    def collect(df: DataFrame, batch_id: int) -> None:
        seen.extend((batch_id, bytes(r.value)) for r in df.collect())

    def crash(df: DataFrame, batch_id: int) -> None:
        raise RuntimeError(f"crash in batch {batch_id}")

    first = run(collect)
    first.awaitTermination(180)
    assert first.exception() is None and sorted(v for _, v in seen) == sorted(old)

    kafka.recreate_topic(topic, 3)
    head = fill(kafka, topic, {p: 3 for p in range(3)}, "head")
    with pytest.raises(StreamingQueryException, match="crash in batch 1"):
        run(crash).awaitTermination(180)
    planned = json.loads((checkpoint / "offsets" / "1").read_text().splitlines()[-1])
    assert planned[topic] == {str(p): 3 for p in range(3)}, "batch 1 was not planned from the re-created topic's earliest offset"
    assert not (checkpoint / "commits" / "1").exists()
    tail = fill(kafka, topic, {p: 10 for p in range(3)}, "tail")

    seen.clear()
    replay = run(collect)
    replay.awaitTermination(180)
    assert replay.exception() is None
    counted = sorted(r.value or b"" for r in kafka.read_committed(topic))
    assert counted == sorted(head + tail)  # the independent consumer: what the re-created topic holds
    assert sorted(v for _, v in seen) == counted
    assert sorted(v for b, v in seen if b == 1) == sorted(head), "the replayed batch 1 did not read [0, 3) of each partition"


@pytest.mark.parametrize("name", KEPT_TOPIC_CASES)
def test_data_loss_after_a_rolling_restart_fails_alike_and_reads_on_alike(
    spark_kafka_source: SparkSession, rolled: tuple[LocalCluster, Topics, dict[str, tuple[str, list[bytes]]]], tmp_path: Path,
    name: str,
) -> None:
    """test_reader_differential's data-loss cases, on topics whose leader epochs are above 0: both sources read
    the records, then fail alike after the change, then (failOnDataLoss=false) deliver the same records."""
    cluster, _, data_loss = rolled
    spark, kafka, case = spark_kafka_source, cluster.kafka, DATA_LOSS_CASES[name]
    topic, old = data_loss[name]
    assert run_both(spark, kafka, tmp_path, topic) == {"kafka": None, "kafka_eos": None}
    new = case.change(kafka, topic)
    failed = run_both(spark, kafka, tmp_path, topic)
    for source, error in failed.items():
        assert error is not None and "failOnDataLoss" in error, f"{source} did not fail on {name}: {error}"
    assert run_both(spark, kafka, tmp_path, topic, failOnDataLoss="false") == {"kafka": None, "kafka_eos": None}
    assert parquet_values(spark, tmp_path, "kafka_eos") == parquet_values(spark, tmp_path, "kafka") == sorted(old + new)
    survivors = {r.value or b"" for r in kafka.read_committed(topic)}  # the independent consumer: what the topic holds now
    assert survivors <= set(old + new) and len(survivors) > 0
