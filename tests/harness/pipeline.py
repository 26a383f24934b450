"""An exactly-once Kafka -> Spark -> Kafka pipeline for writer tests, and the checks on its output."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.harness.faults import FAIL_AT_OPTION, FAULTS_FORMAT
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import assert_stable, open_transactions_by_kafka


def open_transactions(kafka: KafkaTestCluster, prefix: str) -> list[str]:
    """Open transactions of ``prefix`` (task and coordinator ids), as Kafka's own ``kafka-transactions``
    tool lists them: a judge that shares no code with the package's recovery."""
    return open_transactions_by_kafka(kafka.bootstrap_servers, prefix + "-")


@dataclass
class Pipeline:
    """Copies ``source`` to ``sink`` through ``kafka_eos`` with ``prefix``."""

    spark: SparkSession
    kafka: KafkaTestCluster
    source: str
    sink: str
    prefix: str
    checkpoint: Path
    decision_log: str

    @classmethod
    def create(cls, spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path, partitions: int = 3) -> Pipeline:
        tag = uuid.uuid4().hex[:8]
        return cls(
            spark, kafka, kafka.create_topic(partitions, prefix="src"), kafka.create_topic(partitions, prefix="sink"),
            f"eos-{tag}", tmp_path / f"checkpoint-{tag}", f"_decisions-{tag}",
        )

    def source_df(self, **options: object) -> DataFrame:
        reader = (
            self.spark.readStream.format("kafka_eos")
            .option("kafka.bootstrap.servers", self.kafka.bootstrap_servers)
            .option("subscribe", self.source)
            .option("startingOffsets", "earliest")
        )
        for name, value in options.items():
            reader = reader.option(name, str(value))
        return reader.load()

    def start(self, df: DataFrame | None = None, **options: object) -> StreamingQuery:
        if df is None:
            df = self.source_df(maxOffsetsPerTrigger=options.pop("maxOffsetsPerTrigger", 50)).selectExpr("key", "value", "partition")
        writer = (
            df.writeStream.format(FAULTS_FORMAT if FAIL_AT_OPTION in options else "kafka_eos")
            .option("kafka.bootstrap.servers", self.kafka.bootstrap_servers)
            .option("topic", self.sink)
            .option("transactional.id.prefix", self.prefix)
            .option("decisionLogTopic", self.decision_log)
            .option("checkpointLocation", str(self.checkpoint))
        )
        for name, value in options.items():
            writer = writer.option(name, str(value))
        return writer.start()

    def produce(self, count: int, start: int = 0) -> list[Sent]:
        partitions = self.kafka.partitions_of(self.source)
        return self.kafka.produce_plain(
            self.source, [Sent(partitions[i % len(partitions)], f"k{i}".encode(), f"v{i}".encode()) for i in range(start, start + count)]
        )

    def open_transactions(self) -> list[str]:
        return open_transactions(self.kafka, self.prefix)

    def assert_exactly_once(self, sent: list[Sent], ordered: bool = True) -> None:
        """The sink holds every sent record exactly once (in per-partition order, when ``ordered``), and
        no transaction of the prefix is open, as Kafka's own ``kafka-transactions`` tool sees it: the last
        stable offset equals the high watermark on the sink and on the decision log."""
        self.kafka.wait_until_stable(self.sink)
        out = self.kafka.read_committed(self.sink)
        counts = Counter(r.value for r in out)
        duplicates = {v: n for v, n in counts.items() if n > 1}
        missing = {s.value for s in sent} - set(counts)
        assert not duplicates, f"{len(duplicates)} duplicated records, e.g. {list(duplicates.items())[:5]}"
        assert not missing, f"{len(missing)} lost records, e.g. {sorted(missing)[:5]}"
        assert len(out) == len(sent)
        # Records keep their source partition (the partition column) and their order within it.
        for partition in {s.partition for s in sent} if ordered else ():
            written = [s.value for s in sent if s.partition == partition]
            read = [r.value for r in out if r.partition == partition]
            assert read == written, f"partition {partition} out of order"
        assert self.open_transactions() == []
        assert_stable(self.kafka, self.sink, self.decision_log)
