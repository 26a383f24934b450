"""spark.read.format("kafka_eos") on a real broker, checked against an independent
read_committed consumer."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec
from pyspark.sql import SparkSession

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read import partition_reader
from spark_kafka_eos._internal.read.partition_reader import READ_AHEAD, read_offset_range, read_offset_ranges
from spark_kafka_eos._internal.read.planner import OffsetRange, pack_ranges
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.local_kafka import LocalKafka
from tests.harness.spark import assert_same_records, kafka_eos

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_interleaved_producers_return_exactly_the_committed_records(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(3)
    sent = kafka.write_interleaved(topic, [0, 1, 2], producers=3, transactions=3, records_per_transaction=4)
    committed = kafka.read_committed(topic)
    # The yardstick agrees with what the test knows it committed...
    assert sorted((r.partition, r.key or b"", r.value) for r in committed) == sorted((s.partition, s.key or b"", s.value) for s in sent)
    # ...and aborted records really are in the log, so a reader that ignored them would fail.
    assert sum(kafka.offsets(topic, OffsetSpec.latest()).values()) > len(committed) + 9
    df = kafka_eos(spark, kafka, subscribe=topic)
    assert_same_records(df, committed)
    assert df.schema.fieldNames() == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def test_every_single_offset_range_including_markers(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """maxRecordsPerPartition=1 makes each offset, markers and aborted records included, its
    own Spark partition: every range starts and ends at every kind of offset."""
    topic = kafka.create_topic(1)
    kafka.write_interleaved(topic, [0], producers=2, transactions=3, records_per_transaction=3, plain_between=1)
    committed = kafka.read_committed(topic)
    df = kafka_eos(spark, kafka, subscribe=topic, maxRecordsPerPartition=1)
    lso = kafka.offsets(topic, OffsetSpec.latest())[0]
    assert df.rdd.getNumPartitions() == lso
    assert_same_records(df, committed)


def test_any_range_inside_or_across_transactions(kafka: KafkaTestCluster, read_engine: str) -> None:
    """The executor-side range reader, for every [start, end) of a partition where two
    transactions (one committed, one aborted) interleave with plain records."""
    topic = kafka.create_topic(1)
    kafka.write_interleaved(topic, [0], producers=2, transactions=2, records_per_transaction=2, plain_between=1)
    committed = {r.offset: r for r in kafka.read_committed(topic)}
    lso = kafka.offsets(topic, OffsetSpec.latest())[0]
    options = parse_reader_options(
        {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "readEngine": read_engine}, streaming=False
    )
    for start in range(lso + 1):
        for end in sorted({start, start + 1, start + 2, start + 5, lso} - set(range(lso + 1, lso + 6))):
            got = [
                offset
                for batch in read_offset_range(options, OffsetRange(topic, 0, start, end))
                for offset in batch.column("offset").to_pylist()
            ]
            assert got == [o for o in sorted(committed) if start <= o < end], (start, end)


class _AssignedFetchers:
    """Counts the real fetchers that are assigned and not yet released or closed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.live = 0
        self.most = 0
        opened = partition_reader.open_fetcher

        def open_counted(*args: Any, **kwargs: Any) -> Any:
            fetcher = opened(*args, **kwargs)
            counter = self

            class Counted:
                def __getattr__(self, name: str) -> Any:
                    return getattr(fetcher, name)

                def assign(self, offset: int) -> None:
                    fetcher.assign(offset)
                    counter.live += 1
                    counter.most = max(counter.most, counter.live)

                def release(self) -> None:
                    counter.live -= 1
                    fetcher.release()

                def close(self) -> None:
                    counter.live -= 1
                    fetcher.close()

            return Counted()

        monkeypatch.setattr(partition_reader, "open_fetcher", open_counted)


def test_a_packed_partition_reads_its_ranges_in_order_with_the_next_ones_assigned(
        kafka: KafkaTestCluster, read_engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Several ranges of one Spark partition: each range's committed records, range after range; the consumers of
    the next ranges are assigned (fetching) while one is read, never more than READ_AHEAD, all released at the end,
    and all closed when the read is given up half-way."""
    partitions = 2 * READ_AHEAD
    topic = kafka.create_topic(partitions)
    for partition in range(partitions):
        kafka.write_interleaved(topic, [partition], producers=2, transactions=1, records_per_transaction=2, plain_between=1,
                                abort=lambda producer, _: producer == 1)
    committed = kafka.read_committed(topic)
    ends = kafka.offsets(topic, OffsetSpec.latest())
    order = [3, 0, 7, 1, 6, 2, 5, 4]
    ranges = [OffsetRange(topic, p, 0, ends[p]) for p in order]
    assert all(ends[p] > 0 for p in order)
    options = parse_reader_options(
        {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic, "readEngine": read_engine}, streaming=False
    )
    fetchers = _AssignedFetchers(monkeypatch)
    got = [(batch.column("partition")[0].as_py(), offset) for batch in read_offset_ranges(options, ranges)
           for offset in batch.column("offset").to_pylist()]
    assert got == [(p, r.offset) for p in order for r in sorted(committed, key=lambda r: r.offset) if r.partition == p]
    assert (fetchers.most, fetchers.live) == (READ_AHEAD, 0)

    given_up = read_offset_ranges(options, ranges)
    next(given_up)
    assert fetchers.live == READ_AHEAD
    given_up.close()
    assert fetchers.live == 0


def test_aborted_tail_and_markers_at_the_end_never_hang(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, b"k", b"first")])
    txn = kafka.open_transaction(topic, [Sent(0, b"k", f"aborted-{i}".encode()) for i in range(5)])
    txn.abort()
    assert kafka.offsets(topic, OffsetSpec.latest())[0] == 7  # 1 plain + 5 aborted + marker
    assert_same_records(kafka_eos(spark, kafka, subscribe=topic), kafka.read_committed(topic))
    assert kafka_eos(spark, kafka, subscribe=topic).count() == 1


def test_aborted_records_right_below_an_open_transaction(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """The range ends at the LSO just after aborted records whose abort marker lies beyond it:
    no record at or past the end can be fetched while the later transaction is open."""
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, b"p0")])
    doomed = kafka.open_transaction(topic, [Sent(0, None, b"aborted")])
    undecided = kafka.open_transaction(topic, [Sent(0, None, b"undecided")])
    doomed.producer.abort_transaction(30)
    deadline = time.monotonic() + 30
    while kafka.offsets(topic, OffsetSpec.latest())[0] != 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    # The scenario's precondition: the LSO stands at the undecided record (offset 2), right after the
    # aborted one, and the log goes on past it (the undecided record, the abort marker).
    assert kafka.offsets(topic, OffsetSpec.latest()) == {0: 2}
    assert kafka.offsets(topic, OffsetSpec.latest(), committed=False)[0] >= 4
    try:
        rows = kafka_eos(spark, kafka, subscribe=topic, kafkaConsumer__pollTimeoutMs=20_000).collect()
        assert [bytes(r.value) for r in rows] == [b"p0"]
    finally:
        undecided.abort()


def test_small_ranges_of_many_kafka_partitions_share_spark_partitions(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    """Eight partitions of a few records each, aborted transactions between them: one Spark partition by default
    (minRecordsPerPartition 25,000), eight with minRecordsPerPartition=0 (Spark's plan), a few with a middle value; the
    same committed records every time, each Kafka partition's in offset order."""
    topic = kafka.create_topic(8)
    kafka.write_interleaved(topic, list(range(8)), producers=2, transactions=2, records_per_transaction=8)
    committed = kafka.read_committed(topic)
    ends = kafka.offsets(topic, OffsetSpec.latest())
    assert sum(ends.values()) < 10_000 and all(ends.values()), ends
    middle = 2 * max(ends.values())  # any two ranges fit in a pack of it
    packs = len(pack_ranges([OffsetRange(topic, p, 0, end) for p, end in ends.items()], middle))
    assert 1 < packs < 8
    for options, spark_partitions in (({}, 1), ({"minRecordsPerPartition": 0}, 8), ({"minRecordsPerPartition": middle}, packs)):
        df = kafka_eos(spark, kafka, subscribe=topic, **options)
        assert df.rdd.getNumPartitions() == spark_partitions, options
        assert_same_records(df, committed)
        by_partition = df.selectExpr("partition", "offset", "spark_partition_id() AS task").collect()
        for p in range(8):
            offsets = [r.offset for r in by_partition if r.partition == p]
            assert offsets == sorted(offsets) and len({r.task for r in by_partition if r.partition == p}) == 1


def test_one_kafka_partition_split_into_many_spark_partitions(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.write_interleaved(topic, [0], producers=3, transactions=3, records_per_transaction=5)
    committed = kafka.read_committed(topic)
    df = kafka_eos(spark, kafka, subscribe=topic, minPartitions=7)
    assert df.rdd.getNumPartitions() == 7
    assert_same_records(df, committed)
    df = kafka_eos(spark, kafka, subscribe=topic, maxRecordsPerPartition=10)
    assert df.rdd.getNumPartitions() == -(-kafka.offsets(topic, OffsetSpec.latest())[0] // 10)
    assert_same_records(df, committed)


def test_a_batch_read_stops_at_the_lso_of_an_open_transaction(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(2)
    kafka.produce_plain(topic, [Sent(p, None, f"before-{p}".encode()) for p in (0, 1)])
    txn = kafka.open_transaction(topic, [Sent(0, None, b"undecided")])
    kafka.produce_plain(topic, [Sent(0, None, b"after-open"), Sent(1, None, b"after-1")])
    rows = kafka_eos(spark, kafka, subscribe=topic).collect()
    # Partition 0 stops at the open transaction, although "after-open" is already written.
    assert sorted(r.value for r in rows) == [b"after-1", b"before-0", b"before-1"]
    txn.commit()
    rows = kafka_eos(spark, kafka, subscribe=topic).collect()
    assert sorted(r.value for r in rows) == [b"after-1", b"after-open", b"before-0", b"before-1", b"undecided"]


def test_headers_null_keys_and_empty_values(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(
        topic,
        [
            Sent(0, None, b"no key"),
            Sent(0, b"k", b""),
            Sent(0, b"k2", None),
            Sent(0, b"h", b"with headers", headers=(("a", b"1"), ("b", None), ("a", b"2"))),
        ],
    )
    committed = kafka.read_committed(topic)
    df = kafka_eos(spark, kafka, subscribe=topic, includeHeaders="true")
    assert_same_records(df, committed, columns=["key", "value", "offset", "headers"])
    rows = {r.offset: r for r in df.collect()}
    assert rows[0].key is None and rows[1].value == bytearray(b"") and rows[2].value is None
    assert rows[0].headers is None
    assert [(h.key, h.value) for h in rows[3].headers] == [("a", bytearray(b"1")), ("b", None), ("a", bytearray(b"2"))]
    assert {r.timestampType for r in rows.values()} == {0}


def test_offsets_json_assign_and_pattern(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(2, prefix="pattern")
    kafka.produce_plain(topic, [Sent(p, None, f"{p}-{i}".encode()) for p in (0, 1) for i in range(10)])
    committed = kafka.read_committed(topic)
    df = kafka_eos(
        spark, kafka, subscribe=topic,
        startingOffsets=f'{{"{topic}":{{"0":3,"1":-2}}}}',
        endingOffsets=f'{{"{topic}":{{"0":-1,"1":4}}}}',
    )
    assert_same_records(df, [r for r in committed if (r.partition == 0 and r.offset >= 3) or (r.partition == 1 and r.offset < 4)])
    assert_same_records(kafka_eos(spark, kafka, assign=f'{{"{topic}":[1]}}'), [r for r in committed if r.partition == 1])
    pattern = topic.replace("pattern-", "patt[e]rn-")
    assert_same_records(kafka_eos(spark, kafka, subscribePattern=pattern), committed)


def test_timestamp_options(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(2, config={"retention.ms": "-1"})
    # Recent timestamps: time-based retention would delete records stamped years ago at once.
    base = (int(time.time()) - 3600) * 1000
    kafka.produce_plain(topic, [Sent(p, None, f"{p}-{i}".encode(), timestamp_ms=base + i * 1000) for p in (0, 1) for i in range(10)])
    committed = kafka.read_committed(topic)

    def between(lo: int, hi: int) -> list:
        return [r for r in committed if lo <= (r.timestamp_ms or 0) < hi]

    df = kafka_eos(spark, kafka, subscribe=topic, startingTimestamp=base + 3000, endingTimestamp=base + 7000)
    assert_same_records(df, between(base + 3000, base + 7000))
    df = kafka_eos(
        spark, kafka, subscribe=topic,
        startingOffsetsByTimestamp=f'{{"{topic}":{{"0":{base + 8000},"1":{base}}}}}',
        endingOffsetsByTimestamp=f'{{"{topic}":{{"0":{base + 99000},"1":{base + 2000}}}}}',
    )
    assert_same_records(df, [r for r in between(base + 8000, base + 99000) if r.partition == 0] + [r for r in between(base, base + 2000) if r.partition == 1])
    ts = {r.offset: r.timestamp for r in df.where("partition = 1").collect()}
    assert [int(t.timestamp() * 1000) for _, t in sorted(ts.items())] == [base, base + 1000]
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):
        kafka_eos(spark, kafka, subscribe=topic, startingTimestamp=base + 60_000).collect()
    assert kafka_eos(spark, kafka, subscribe=topic, startingTimestamp=base + 60_000, startingOffsetsByTimestampStrategy="latest").count() == 0


def test_fail_on_data_loss_for_deleted_records(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, f"v{i}".encode()) for i in range(10)])
    kafka.admin.delete_records([TopicPartition(topic, 0, 4)])[TopicPartition(topic, 0, 4)].result(30)
    starting = f'{{"{topic}":{{"0":0}}}}'
    with pytest.raises(Exception, match="offsets 0 to 3 were deleted"):
        kafka_eos(spark, kafka, subscribe=topic, startingOffsets=starting).collect()
    rows = kafka_eos(spark, kafka, subscribe=topic, startingOffsets=starting, failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == list(range(4, 10))


def test_kafka_passthrough_and_read_uncommitted(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, b"x" * 1000) for _ in range(50)])
    txn = kafka.open_transaction(topic, [Sent(0, None, b"open")])
    try:
        # A tiny fetch size forces many fetches; the result is the same.
        df = kafka_eos(
            spark, kafka, subscribe=topic, kafka__fetch__max__bytes=2048, kafka__message__max__bytes=2048,
            kafka__max__partition__fetch__bytes=2048, kafka__client__id="eos-test", maxRecordsPerBatch=7,
        )
        assert df.count() == 50
        # read_uncommitted reads up to the high watermark, open transaction included.
        assert kafka_eos(spark, kafka, subscribe=topic, kafka__isolation__level="read_uncommitted").count() == 51
    finally:
        txn.abort()


def test_an_empty_topic_reads_as_empty(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(2)
    assert kafka_eos(spark, kafka, subscribe=topic).count() == 0


def test_starting_offsets_group_on_a_new_cluster_waits_for_its_group_coordinator(spark: SparkSession, tmp_path: Path) -> None:
    """A new cluster's (or a restarted broker's) group coordinator answers COORDINATOR_LOAD_IN_PROGRESS
    while it loads the offsets topic, for longer than a few fetchOffset retries on a busy machine: the
    planner waits for it (within the request timeout) instead of failing the read. No retries here, so
    only that wait can make the read succeed."""
    with LocalKafka(tmp_path / "new-cluster") as broker:
        new_cluster = KafkaTestCluster(broker.bootstrap_servers)
        topic = new_cluster.create_topic(1)
        sent = new_cluster.produce_plain(topic, [Sent(0, None, f"v{i}".encode()) for i in range(5)])
        df = kafka_eos(spark, new_cluster, subscribe=topic, startingOffsets="group", consumerGroup="a-new-group",
                      fetchOffset__numRetries=0)
        assert sorted(r.value for r in df.collect()) == sorted(s.value for s in sent)
