"""Differential tests: Spark's own Kafka source (``format("kafka")``, read_committed) is the oracle.

The same reads run through both sources on the same topics and must return identical rows
(topic, partition, offset, key, value, timestamp, timestampType, headers), fail or succeed alike
in the data-loss cases, and deliver the same rows under ``maxOffsetsPerTrigger``. Where kafka_eos
differs from Spark on purpose (README, "Differences from Spark's Kafka source"), the test pins
both behaviours.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from chispa import assert_df_equality
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import NewTopic
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.spark import batch_read
from tests.harness.stream import parquet_values, stream, to_memory, to_parquet

if TYPE_CHECKING:
    from tests.harness.local_cluster import LocalCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SOURCES = ("kafka", "kafka_eos")
# Both sources read committed records only; a low answer about a log end is asked again quickly.
COMMON = {"kafka.isolation.level": "read_committed", "fetchOffset.retryIntervalMs": "10"}
ALL_COLUMNS = ["topic", "partition", "offset", "key", "value", "timestamp", "timestampType"]


@dataclass(frozen=True)
class Topics:
    prefix: str
    txn: str  # 3 partitions: interleaved transactions (some aborted) and plain records
    plain: str  # 2 partitions: headers, null keys, empty values, known timestamps
    t0: int  # the first record's timestamp: recent, or retention would delete the records at once


@pytest.fixture(scope="module")
def topics(kafka: KafkaTestCluster) -> Topics:
    return make_topics(kafka)


def make_topics(kafka: KafkaTestCluster) -> Topics:
    """The topics the batch reads compare (also on a cluster after a rolling restart, test_reader_differential_cluster)."""
    prefix = f"diff{uuid.uuid4().hex[:6]}"
    t0 = int(time.time() * 1000) - 60_000
    txn, plain = kafka.create_topic(3, prefix=prefix), kafka.create_topic(2, prefix=prefix)
    kafka.write_interleaved(txn, [0, 1, 2], producers=2, transactions=3, records_per_transaction=6)
    records = [
        Sent(
            i % 2, None if i % 3 == 0 else f"k{i}".encode(), b"" if i % 5 == 0 else f"v{i}".encode(),
            headers=None if i % 4 == 0 else (("h", f"x{i}".encode()), ("n", None)), timestamp_ms=t0 + 1000 * i,
        )
        for i in range(12)
    ]
    kafka.produce_plain(plain, records)
    return Topics(prefix, txn, plain, t0)


def both(spark: SparkSession, kafka: KafkaTestCluster, **options: object) -> tuple[DataFrame, DataFrame]:
    """The same batch read through Spark's source and through kafka_eos."""
    oracle, ours = (batch_read(spark, kafka, source, **{**COMMON, **options}) for source in SOURCES)
    return oracle, ours


def assert_identical(oracle: DataFrame, ours: DataFrame, headers: bool = False) -> int:
    columns = ALL_COLUMNS + (["headers"] if headers else [])
    expected, actual = oracle.select(*columns), ours.select(*columns)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
    return expected.count()


def read_options(t: Topics) -> dict[str, dict[str, object]]:
    return {
        "subscribe": {"subscribe": f"{t.txn},{t.plain}"},
        "subscribePattern": {"subscribePattern": f"{t.prefix}-.*"},
        "subscribePattern found inside the names": {"subscribePattern": t.prefix[2:]},
        "assign": {"assign": f'{{"{t.txn}":[0,2],"{t.plain}":[1]}}'},
        "json offsets": {
            "subscribe": t.txn,
            "startingOffsets": f'{{"{t.txn}":{{"0":2,"1":-2,"2":5}}}}',
            "endingOffsets": f'{{"{t.txn}":{{"0":-1,"1":7,"2":-1}}}}',
        },
        "timestamps": {"subscribe": t.plain, "startingTimestamp": t.t0 + 3000, "endingTimestamp": t.t0 + 9000},
        "timestamps by partition, strategy latest": {
            "subscribe": t.plain,
            "startingOffsetsByTimestamp": f'{{"{t.plain}":{{"0":{t.t0 + 4000},"1":{t.t0 + 60_000}}}}}',
            "startingOffsetsByTimestampStrategy": "latest",
        },
        "minPartitions": {"subscribe": f"{t.txn},{t.plain}", "minPartitions": 7},
        "topic named twice": {"subscribe": f"{t.txn},{t.txn}"},
        "partition named twice": {"assign": f'{{"{t.plain}":[0,0,1]}}'},
    }


CASES = list(read_options(Topics("p", "t", "u", 0)))


@pytest.mark.parametrize("case", CASES)
def test_batch_reads_return_the_same_rows(spark_kafka_source: SparkSession, kafka: KafkaTestCluster, topics: Topics, case: str) -> None:
    oracle, ours = both(spark_kafka_source, kafka, **read_options(topics)[case])
    assert assert_identical(oracle, ours) > 0


def test_headers_are_the_same(spark_kafka_source: SparkSession, kafka: KafkaTestCluster, topics: Topics) -> None:
    oracle, ours = both(spark_kafka_source, kafka, subscribe=topics.plain, includeHeaders="true")
    assert assert_identical(oracle, ours, headers=True) == 12


def test_each_read_engine_returns_the_same_rows(
    spark_kafka_source: SparkSession, kafka: KafkaTestCluster, topics: Topics, read_engine: str
) -> None:
    """The compiled and the pure-Python path each against the oracle (the tests above read with the default)."""
    for subscribe, headers in ((topics.txn, False), (topics.plain, True)):
        options = {**COMMON, "subscribe": subscribe, "includeHeaders": str(headers).lower()}
        oracle = batch_read(spark_kafka_source, kafka, "kafka", **options)
        ours = batch_read(spark_kafka_source, kafka, "kafka_eos", **options, readEngine=read_engine)
        assert assert_identical(oracle, ours, headers=headers) > 0


def rows_read(df: DataFrame) -> set[tuple[int, int]]:
    """(partition, offset) of every row of ``df``."""
    return {(r.partition, r.offset) for r in df.select("partition", "offset").collect()}


def test_the_global_timestamp_wins_over_the_per_partition_forms(
    spark_kafka_source: SparkSession, kafka: KafkaTestCluster, topics: Topics
) -> None:
    """All three forms given at once, each pointing elsewhere: Spark's precedence is startingTimestamp,
    then startingOffsetsByTimestamp, then startingOffsets (and the same for the end)."""
    t, plain = topics, topics.plain
    # Partition p holds record i (timestamp t0 + 1000 i) at offset i // 2, for i % 2 == p.
    by_partition = {
        "startingOffsetsByTimestamp": json.dumps({plain: {"0": t.t0 + 6000, "1": t.t0 + 6000}}),
        "endingOffsetsByTimestamp": json.dumps({plain: {"0": t.t0 + 10_000, "1": t.t0 + 10_000}}),
    }
    offsets = {"startingOffsets": json.dumps({plain: {"0": 0, "1": 0}}), "endingOffsets": json.dumps({plain: {"0": 1, "1": 1}})}
    global_ts = {"startingTimestamp": t.t0 + 3000, "endingTimestamp": t.t0 + 9000}

    oracle, ours = both(spark_kafka_source, kafka, subscribe=plain, **global_ts, **by_partition, **offsets)
    assert assert_identical(oracle, ours) == 6
    assert rows_read(ours) == {(0, 2), (0, 3), (0, 4), (1, 1), (1, 2), (1, 3)}  # records 3 to 8

    oracle, ours = both(spark_kafka_source, kafka, subscribe=plain, **by_partition, **offsets)
    assert assert_identical(oracle, ours) == 4
    assert rows_read(ours) == {(0, 3), (0, 4), (1, 3), (1, 4)}  # records 6 to 9


def test_streams_with_max_offsets_per_trigger_deliver_the_same_rows(
    spark_kafka_source: SparkSession, kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    """A skewed backlog: the small partitions are not starved, and nothing is lost or repeated."""
    spark = spark_kafka_source
    topic = kafka.create_topic(3)
    kafka.produce_plain(topic, [Sent(0, None, f"big{i}".encode()) for i in range(60)] + [Sent(1, None, b"s1"), Sent(2, None, b"s2")])
    tables, first_batches = {}, {}
    for source in SOURCES:
        df = stream(spark, kafka, source, subscribe=topic, maxOffsetsPerTrigger=10, **COMMON).select(*ALL_COLUMNS)
        query, tables[source] = to_memory(df, tmp_path, availableNow=True)
        assert query.awaitTermination(120)
        first = next(p for p in query.recentProgress if p["numInputRows"])
        first_batches[source] = {int(p): o for p, o in json.loads(first["sources"][0]["endOffset"])[topic].items()}
    oracle, ours = (spark.table(tables[s]) for s in SOURCES)
    assert assert_identical(oracle, ours) == 62
    # Both give each small partition one offset in the first batch; Spark adds them on top of the
    # maximum, kafka_eos takes them out of the large partition's share.
    assert first_batches == {"kafka": {0: 9, 1: 1, 2: 1}, "kafka_eos": {0: 8, 1: 1, 2: 1}}


def test_available_now_with_min_offsets_per_trigger(spark_kafka_source: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """kafka_eos's Trigger.AvailableNow reads everything there was at its start, whatever
    minOffsetsPerTrigger says. Spark's source applies the minimum there too and ends the run with
    the last chunk below it unread (10 of 60 records here), successfully."""
    spark = spark_kafka_source
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, f"v{i}".encode()) for i in range(60)])
    limits = {"minOffsetsPerTrigger": 50, "maxOffsetsPerTrigger": 50, "maxTriggerDelay": "1h"}
    counts = {}
    for source in SOURCES:
        query, table = to_memory(stream(spark, kafka, source, subscribe=topic, **limits, **COMMON), tmp_path, availableNow=True)
        assert query.awaitTermination(120)
        counts[source] = spark.table(table).count()
    assert counts == {"kafka": 50, "kafka_eos": 60}


# -- data loss: the same failure or success --------------------------------------------------


@dataclass
class DataLossCase:
    """A stream reads ``before``; then ``change`` happens; then the stream restarts."""

    partitions: int
    before: dict[int, int]
    change: Callable[[KafkaTestCluster, str], list[bytes]]
    # With failOnDataLoss=false: what each source delivers after the change (None: identical).
    spark_after: Callable[[list[bytes]], list[bytes]] | None = None


def fill(kafka: KafkaTestCluster, topic: str, counts: dict[int, int], tag: str) -> list[bytes]:
    sent = kafka.produce_plain(topic, [Sent(p, None, f"{tag}-{p}-{i:03d}".encode()) for p, n in counts.items() for i in range(n)])
    return [r.value or b"" for r in sent]


def recreate(partitions: int, counts: dict[int, int]) -> Callable[[KafkaTestCluster, str], list[bytes]]:
    def change(kafka: KafkaTestCluster, topic: str) -> list[bytes]:
        kafka.recreate_topic(topic, partitions)
        return fill(kafka, topic, counts, "new")

    return change


def delete_below_position(kafka: KafkaTestCluster, topic: str) -> list[bytes]:
    new = fill(kafka, topic, {0: 10}, "new")
    kafka.admin.delete_records([TopicPartition(topic, 0, 15)])[TopicPartition(topic, 0, 15)].result(30)
    return new[5:]  # offsets 15..19 survive


def add_partition_and_delete_its_head(kafka: KafkaTestCluster, topic: str) -> list[bytes]:
    kafka.add_partitions(topic, 2)
    new = fill(kafka, topic, {1: 5}, "new")
    kafka.admin.delete_records([TopicPartition(topic, 1, 3)])[TopicPartition(topic, 1, 3)].result(30)
    return new[3:]  # offsets 3..4 of the added partition survive


NOTHING_NEW: Callable[[list[bytes]], list[bytes]] = lambda new: []  # noqa: E731

DATA_LOSS_CASES = {
    # Spark, with failOnDataLoss=false, plans the batch [old end, new end), which is empty, and goes on
    # from the new end: the re-created topic's first records are never read. kafka_eos reads them.
    "topic re-created (offsets reset to 0)": DataLossCase(1, {0: 50}, recreate(1, {0: 20}), spark_after=NOTHING_NEW),
    "topic re-created with fewer partitions": DataLossCase(2, {0: 5, 1: 5}, recreate(1, {0: 2}), spark_after=NOTHING_NEW),
    "log end moved back (truncation)": DataLossCase(1, {0: 10}, recreate(1, {0: 4}), spark_after=NOTHING_NEW),
    "records deleted below the position": DataLossCase(1, {0: 10}, delete_below_position),
    "partition added, its head deleted before the query saw it": DataLossCase(1, {0: 5}, add_partition_and_delete_its_head),
}


def run_both(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path, topic: str, **options: object) -> dict[str, str | None]:
    """One AvailableNow run of each source's query (checkpoints survive across calls); the error
    of each run, None when it succeeded."""
    queries = {s: to_parquet(stream(spark, kafka, s, subscribe=topic, **{**COMMON, **options}), tmp_path, s, availableNow=True) for s in SOURCES}
    outcome: dict[str, str | None] = {}
    for source, query in queries.items():
        try:
            assert query.awaitTermination(120)
            outcome[source] = None
        except StreamingQueryException as failure:
            outcome[source] = str(failure)
    return outcome


# make test runs the re-created topic and the deleted records; the long tier all of them (make test's budget).
LONG_DATA_LOSS_CASES = {"topic re-created with fewer partitions", "log end moved back (truncation)",
                        "partition added, its head deleted before the query saw it"}


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.long) if name in LONG_DATA_LOSS_CASES else name
                                  for name in DATA_LOSS_CASES])
def test_data_loss_fails_alike_and_kafka_eos_reads_on_from_earliest(
    spark_kafka_source: SparkSession, kafka: KafkaTestCluster, tmp_path: Path, name: str
) -> None:
    spark, case = spark_kafka_source, DATA_LOSS_CASES[name]
    topic = kafka.create_topic(case.partitions)
    old = fill(kafka, topic, case.before, "old")
    assert run_both(spark, kafka, tmp_path, topic) == {"kafka": None, "kafka_eos": None}
    new = case.change(kafka, topic)

    failed = run_both(spark, kafka, tmp_path, topic)
    for source, error in failed.items():
        assert error is not None and "failOnDataLoss" in error, f"{source} did not fail on {name}: {error}"
    assert all(parquet_values(spark, tmp_path, s) == sorted(old) for s in SOURCES)

    assert run_both(spark, kafka, tmp_path, topic, failOnDataLoss="false") == {"kafka": None, "kafka_eos": None}
    assert parquet_values(spark, tmp_path, "kafka_eos") == sorted(old + new)
    spark_new = case.spark_after(new) if case.spark_after else new
    assert parquet_values(spark, tmp_path, "kafka") == sorted(old + spark_new)


def test_a_given_start_past_the_end(spark_kafka_source: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """Spark's stream fails with failOnDataLoss=true, and with false goes on from the end; kafka_eos
    fails alike, and with false reads the partition from its earliest offset. A batch read of
    Spark's fails whatever failOnDataLoss says; kafka_eos follows failOnDataLoss there too."""
    spark = spark_kafka_source
    topic = kafka.create_topic(1)
    values = fill(kafka, topic, {0: 10}, "v")
    past = f'{{"{topic}":{{"0":25}}}}'
    failed = run_both(spark, kafka, tmp_path / "strict", topic, startingOffsets=past)
    assert all(error is not None and "failOnDataLoss" in error for error in failed.values()), failed
    lenient = run_both(spark, kafka, tmp_path / "lenient", topic, startingOffsets=past, failOnDataLoss="false")
    assert lenient == {"kafka": None, "kafka_eos": None}
    assert parquet_values(spark, tmp_path / "lenient", "kafka") == []
    assert parquet_values(spark, tmp_path / "lenient", "kafka_eos") == sorted(values)

    for fail_on_data_loss in ("true", "false"):
        oracle, _ = both(spark, kafka, subscribe=topic, startingOffsets=past, failOnDataLoss=fail_on_data_loss)
        with pytest.raises(Exception, match="resolved start offset 25 is greater than the resolved end offset 10"):
            oracle.collect()
    _, ours = both(spark, kafka, subscribe=topic, startingOffsets=past)
    with pytest.raises(Exception, match="stands at offset 25, but the partition's log now ends at offset 10.*failOnDataLoss"):
        ours.collect()
    _, ours = both(spark, kafka, subscribe=topic, startingOffsets=past, failOnDataLoss="false")
    assert sorted(bytes(r.value) for r in ours.collect()) == sorted(values)


def test_a_start_inside_an_open_transaction(spark_kafka_source: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """A start past the LSO but inside the log: Spark's read_committed "latest" is the LSO, so it
    reports the partition's offset as moved back and fails; kafka_eos waits for the transaction."""
    spark = spark_kafka_source
    topic = kafka.create_topic(1)
    fill(kafka, topic, {0: 3}, "v")
    txn = kafka.open_transaction(topic, [Sent(0, None, b"t1"), Sent(0, None, b"t2")])
    try:
        outcome = run_both(spark, kafka, tmp_path, topic, startingOffsets=f'{{"{topic}":{{"0":4}}}}')
    finally:
        txn.commit()
    assert outcome["kafka_eos"] is None
    assert outcome["kafka"] is not None and "offset was changed from 4 to 3" in outcome["kafka"]
    assert parquet_values(spark, tmp_path, "kafka_eos") == []


def test_partitions_added_between_micro_batches_are_read_alike_from_their_start(
    spark_kafka_source: SparkSession, kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    """No loss: a partition added after the last micro-batch is read from offset 0 by both sources."""
    spark = spark_kafka_source
    topic = kafka.create_topic(1)
    old = fill(kafka, topic, {0: 5}, "old")
    assert run_both(spark, kafka, tmp_path, topic) == {"kafka": None, "kafka_eos": None}
    kafka.add_partitions(topic, 3)
    new = fill(kafka, topic, {0: 2, 1: 3, 2: 4}, "new")
    assert run_both(spark, kafka, tmp_path, topic) == {"kafka": None, "kafka_eos": None}
    assert parquet_values(spark, tmp_path, "kafka") == parquet_values(spark, tmp_path, "kafka_eos") == sorted(old + new)


# -- a lagging follower ------------------------------------------------------------------------------

FOLLOWER_RACK = "rack-2"


@pytest.fixture(scope="module")
def racked_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Two brokers in racks rack-1 and rack-2 that serve a consumer from the replica in its rack (KIP-392).
    A follower learns the high watermark in its next fetch, which the leader holds for
    replica.fetch.wait.max.ms while no record comes: here 20 s, so after a write the follower's answer ends
    below the leader's for 20 s."""
    from tests.harness.local_cluster import LocalCluster

    def racked(node_id: int) -> dict[str, str]:
        return {"broker.rack": f"rack-{node_id}", "replica.fetch.wait.max.ms": "20000",
                "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}

    cluster = LocalCluster(tmp_path_factory.mktemp("racked"), size=2, min_insync_replicas=1, node_overrides=racked).start()
    try:
        yield cluster
    finally:
        for node_id in cluster.node_ids:
            cluster.kill(node_id)


def follower_end(bootstrap_servers: str, topic: str) -> int:
    """Where the rack-2 follower says partition 0 ends now: the offset of its first end-of-partition event."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"probe-{uuid.uuid4().hex[:6]}",
                         "client.rack": FOLLOWER_RACK, "enable.partition.eof": True, "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            error = message.error() if message is not None else None
            if message is not None and error is not None and error.code() == KafkaError._PARTITION_EOF:
                return message.offset() or 0
        raise AssertionError(f"no end of partition from the follower of {topic} in 30 s")
    finally:
        consumer.close()


def test_a_lagging_follower_is_read_alike_to_the_planned_end(spark_kafka_source: SparkSession, racked_cluster: LocalCluster) -> None:
    """``kafka.client.rack`` reads from the follower in that rack, whose log ends below the end planned at the
    leader for a while after each write. Here it ends one record short: librdkafka 2.12's position after that
    end-of-partition event made the compiled path end its range there, without the last record (issue 32).
    Each source, and each of kafka_eos's engines, reads fresh records while the follower lags, and delivers all
    of them."""
    spark, kafka = spark_kafka_source, racked_cluster.kafka
    topic = f"lag-{uuid.uuid4().hex[:6]}"
    kafka.admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2]])])[topic].result(30)
    start = 0
    for source, engine in (("kafka", None), ("kafka_eos", "native"), ("kafka_eos", "python")):
        # Nine records, then one: the follower's fetch of the tenth brings it the high watermark of the nine.
        sent = fill(kafka, topic, {0: 9}, f"{source}-{engine}") + fill(kafka, topic, {0: 1}, f"{source}-{engine}-last")
        assert follower_end(kafka.bootstrap_servers, topic) == start + 9, "the follower is not one record behind"
        options = {**COMMON, "subscribe": topic, "kafka__client__rack": FOLLOWER_RACK,
                   "startingOffsets": json.dumps({topic: {"0": start}}), **({"readEngine": engine} if engine else {})}
        rows = batch_read(spark, kafka, source, **options).select("offset", "value").collect()
        assert sorted((r.offset, bytes(r.value)) for r in rows) == list(zip(range(start, start + 10), sent)), (source, engine)
        start += 10
