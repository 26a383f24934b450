"""README promises of the writer, checked on the real broker against Kafka's own tools and clients."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AclOperation, AdminClient, ConfigResource, NewTopic, OffsetSpec, ResourcePatternType, ResourceType
from pyspark.sql import SparkSession

from tests.harness.kafka import KafkaRecord, KafkaTestCluster, Sent
from tests.harness.kafka_tools import console_produce, kafka_transactions, transactions_by_kafka
from tests.harness.pipeline import Pipeline
from tests.harness.secured_kafka import READER, READER_PASSWORD, SecuredKafka, allow

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
PROJECT = Path(__file__).resolve().parents[3]


def partition_by_key(records: list[KafkaRecord]) -> dict[bytes, int]:
    """Each record's key mapped to the partition it landed in."""
    return {record.key: record.partition for record in records if record.key is not None}


def test_keys_land_where_the_java_client_puts_them(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """murmur2 placement: kafka_eos puts each key in the partition Kafka's console producer picks."""
    keys = [f"key-{i}" for i in range(500)]
    by_java = kafka.create_topic(7, prefix="java")
    console_produce(kafka.bootstrap_servers, by_java, ((key, "v") for key in keys))
    pipeline = Pipeline.create(spark, kafka, tmp_path, partitions=7)
    df = spark.createDataFrame([(key, "v") for key in keys], "key STRING, value STRING")
    (
        df.write.format("kafka_eos").mode("append")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("topic", pipeline.sink)
        .option("transactional.id.prefix", pipeline.prefix)
        .option("decisionLogTopic", pipeline.decision_log)
        .save()
    )
    kafka.wait_until_stable(pipeline.sink)
    java = partition_by_key(kafka.read_committed(by_java))
    ours = partition_by_key(kafka.read_committed(pipeline.sink))
    assert len(java) == len(keys) and len(set(java.values())) == 7
    assert ours == java


def test_transactional_ids_stay_bounded_across_epochs(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """Ids are reused every other epoch: after 4 micro-batches and after 12, Kafka knows the same ids of
    the prefix, at most 2 x partitions (one attempt each) + the coordinator's."""
    pipeline = Pipeline.create(spark, kafka, tmp_path)
    sent = pipeline.produce(60)
    query = pipeline.start(maxOffsetsPerTrigger=15)
    try:
        query.processAllAvailable()
        after_four = set(transactions_by_kafka(kafka.bootstrap_servers, pipeline.prefix + "-"))
        sent += pipeline.produce(120, start=60)
        query.processAllAvailable()
        batches = sum(1 for p in query.recentProgress if p["numInputRows"])
    finally:
        query.stop()
    after_twelve = set(transactions_by_kafka(kafka.bootstrap_servers, pipeline.prefix + "-"))
    assert batches >= 12
    assert after_twelve == after_four
    assert len(after_twelve) <= 2 * 3 + 1, sorted(after_twelve)
    pipeline.assert_exactly_once(sent)


def broker_max_transaction_timeout_ms(kafka: KafkaTestCluster) -> int:
    broker = ConfigResource(ConfigResource.Type.BROKER, str(next(iter(kafka.admin.list_topics(timeout=10).brokers))))
    return int(kafka.admin.describe_configs([broker])[broker].result(30)["transaction.max.timeout.ms"].value)


def test_the_transaction_timeout_is_the_brokers_maximum_unless_set(spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    """A participant left open by a stalled task has the broker's transaction.max.timeout.ms, as Kafka's
    own kafka-transactions describe reports it."""
    pipeline = Pipeline.create(spark, kafka, tmp_path, partitions=1)
    sent = pipeline.produce(40)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "5")
    try:
        query = pipeline.start(maxOffsetsPerTrigger=40, **{"testing.failAt": "task_write:sleep6"})
        try:
            deadline, ongoing = time.monotonic() + 120, []
            while not ongoing and time.monotonic() < deadline:
                ongoing = [t for t, state in transactions_by_kafka(kafka.bootstrap_servers, pipeline.prefix + "-").items()
                           if state == "Ongoing" and not t.endswith("-coordinator")]
                time.sleep(0.2)
            assert ongoing, "the stalled task left no open transaction"
            described = kafka_transactions("--bootstrap-server", kafka.bootstrap_servers, "describe", "--transactional-id", ongoing[0])
            query.processAllAvailable()
        finally:
            query.stop()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    header, row = [line.split("\t") for line in described.strip().splitlines()[:2]]
    assert int(dict(zip([h.strip() for h in header], [r.strip() for r in row]))["TransactionTimeoutMs"]) == broker_max_transaction_timeout_ms(kafka)
    pipeline.assert_exactly_once(sent)


def test_a_transaction_timeout_above_the_brokers_maximum_is_refused_before_any_data_moves(
        spark: SparkSession, kafka: KafkaTestCluster, tmp_path: Path) -> None:
    pipeline = Pipeline.create(spark, kafka, tmp_path, partitions=1)
    too_long = broker_max_transaction_timeout_ms(kafka) + 1
    with pytest.raises(Exception, match=rf"kafka.transaction.timeout.ms.*is {too_long}, above the broker's transaction.max.timeout.ms"):
        (spark.range(5).selectExpr("CAST(id AS STRING) AS value").write.format("kafka_eos").mode("append")
         .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", pipeline.sink)
         .option("transactional.id.prefix", pipeline.prefix).option("kafka.transaction.timeout.ms", str(too_long)).save())
    assert kafka.offsets(pipeline.sink, OffsetSpec.latest(), committed=False) == {0: 0}


@pytest.fixture(scope="module")
def secured_with_topics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    """A SASL broker with the secret- topics, five records to read, and the reader's ACLs (one for both passwords)."""
    with SecuredKafka(tmp_path_factory.mktemp("secured")) as secured:
        admin = AdminClient({"bootstrap.servers": secured.bootstrap_servers})
        for topic in ("secret-src", "secret-sink"):
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        for binding in (allow(ResourceType.TOPIC, "secret-", AclOperation.ALL, pattern=ResourcePatternType.PREFIXED)
                        + allow(ResourceType.TRANSACTIONAL_ID, "secret-", AclOperation.ALL, pattern=ResourcePatternType.PREFIXED)
                        + allow(ResourceType.GROUP, "*", AclOperation.ALL)
                        + allow(ResourceType.TOPIC, "_kafka_eos_decisions", AclOperation.ALL)
                        + allow(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS)):
            for future in admin.create_acls([binding]).values():
                future.result(30)
        KafkaTestCluster(secured.bootstrap_servers).produce_plain("secret-src", [Sent(0, None, f"v{i}".encode()) for i in range(5)])
        yield secured


# The wrong password's run in the long tier (make test's budget): test_authentication.py's refusals show no password in make test.
@pytest.mark.parametrize("password", [READER_PASSWORD, pytest.param("a-wrong-password-0451", marks=pytest.mark.long)])
def test_passwords_never_appear_in_logs_plans_or_errors(secured_with_topics: SecuredKafka, password: str) -> None:
    """A driver of its own reads and writes over SASL (right and wrong password), logging at DEBUG, with
    plans and option reprs printed; the password is nowhere in its output."""
    options = {**secured_with_topics.reader_options(), "kafka.sasl.password": password}
    done = subprocess.run([sys.executable, "-m", "tests.harness.secret_job", json.dumps(options), "secret-src", "secret-sink", "secret-job"],
                          capture_output=True, text=True, timeout=300, cwd=PROJECT)
    output = done.stdout + done.stderr
    assert ("read 5" in done.stdout and "written" in done.stdout) if password == READER_PASSWORD else "authentication failed" in output, output[-3000:]
    assert READER in output and "DEBUG" in output, "the job logged its options and its clients"
    assert password not in output
