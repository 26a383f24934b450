"""SCRAM-SHA-512 over TLS, with ACLs: the reader, the sink (its tasks, the coordinator's own requests and
the decision log) and the CLI all work over a SASL_SSL listener; a principal without the prefixed
TransactionalId ACL gets the error that names it; the password shows nowhere. The sink needs Read on its
decision log's index group, which a prefixed group ACL on the transactional id prefix covers; the
Databricks pipeline notebook's ``kafka_options`` widget carries the security options to both ends.

The broker is tests/harness/tls_kafka.py (a CA and keys made by keytool at test time). The outcome is
judged through the broker's PLAINTEXT listener: an independent read_committed consumer and Kafka's own
kafka-transactions tool."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AclOperation, AclPermissionType, NewTopic, OffsetSpec, ResourceType
from pyspark.sql import SparkSession

from spark_kafka_eos._internal.config.writer import DERIVED_PREFIX_START, derived_prefix
from spark_kafka_eos.cli import main as cli
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.kafka_tools import assert_stable, open_transactions_by_kafka
from tests.harness.notebook_runner import notebook_command
from tests.harness.tls_kafka import ScramTlsKafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ALICE, ALICE_PASSWORD = "alice", "alice-" + uuid.uuid4().hex
BOB, BOB_PASSWORD = "bob", "bob-" + uuid.uuid4().hex
CAROL, CAROL_PASSWORD = "carol", "carol-" + uuid.uuid4().hex
DAVE, DAVE_PASSWORD = "dave", "dave-" + uuid.uuid4().hex
ERIN, ERIN_PASSWORD = "erin", "erin-" + uuid.uuid4().hex
DECISION_LOG = "_kafka_eos_decisions"
PREFIX = "eos-"
PROJECT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramTlsKafka]:
    """Alice may do everything on topics and groups, and on transactional ids starting with ``eos-`` (or the
    derived prefixes' start), and read the brokers' configs; Bob may do everything on topics and groups, and
    nothing else. Carol and Dave are Alice on topics, transactional ids and configs, but Carol's groups are
    only those starting with ``eos-`` and Dave may use no group at all. Erin is Alice, but may not read the
    decision log."""
    with ScramTlsKafka(tmp_path_factory.mktemp("tls-kafka")) as broker:
        for user, password in ((ALICE, ALICE_PASSWORD), (BOB, BOB_PASSWORD), (CAROL, CAROL_PASSWORD), (DAVE, DAVE_PASSWORD),
                               (ERIN, ERIN_PASSWORD)):
            broker.add_user(user, password)
            broker.grant(user, ResourceType.TOPIC)
        for user in (ALICE, BOB, ERIN):
            broker.grant(user, ResourceType.GROUP)
        broker.grant(CAROL, ResourceType.GROUP, PREFIX)
        broker.grant(ERIN, ResourceType.TOPIC, DECISION_LOG, AclOperation.READ, AclPermissionType.DENY)
        for user in (ALICE, CAROL, DAVE, ERIN):
            broker.grant(user, ResourceType.TRANSACTIONAL_ID, PREFIX)
            broker.grant(user, ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS)
        broker.grant(ALICE, ResourceType.TRANSACTIONAL_ID, DERIVED_PREFIX_START)
        yield broker


def create_topics(tls: ScramTlsKafka, *names: str) -> None:
    for future in tls.admin.create_topics([NewTopic(n, 3, 1) for n in names]).values():
        future.result(30)


def test_a_pipeline_over_sasl_ssl_is_exactly_once(spark: SparkSession, tls: ScramTlsKafka, tmp_path: Path) -> None:
    """Its consumerGroup is named under the prefix, so Alice's prefixed TransactionalId ACL covers the group's claim."""
    judge = KafkaTestCluster(tls.bootstrap_servers)  # the PLAINTEXT listener
    tag = uuid.uuid4().hex[:6]
    source, sink, prefix = f"src-{tag}", f"sink-{tag}", f"{PREFIX}{tag}"
    create_topics(tls, source, sink)
    sent = judge.produce_plain(source, [Sent(i % 3, None, f"r{i}".encode()) for i in range(300)])
    options = tls.client_options(ALICE, ALICE_PASSWORD)
    df = (spark.readStream.format("kafka_eos").options(**options).option("subscribe", source)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "100").load())
    query = (df.selectExpr("value", "topic AS source_topic", "partition AS source_partition", "offset AS source_offset")
             .writeStream.format("kafka_eos").options(**options).option("topic", sink)
             .option("transactional.id.prefix", prefix).option("consumerGroup", f"{prefix}-group")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    assert sum(p["numInputRows"] for p in query.recentProgress) == 300

    judge.wait_until_stable(sink)
    assert sorted(r.value or b"" for r in judge.read_committed(sink)) == sorted(s.value or b"" for s in sent)
    assert open_transactions_by_kafka(tls.bootstrap_servers, prefix + "-") == []
    assert_stable(judge, sink, "_kafka_eos_decisions")

    batch = spark.read.format("kafka_eos").options(**options).option("subscribe", sink).load()
    assert batch.count() == 300
    assert ALICE_PASSWORD not in batch._jdf.queryExecution().toString()


def test_a_consumer_group_outside_the_prefix_acl_is_refused_at_its_claim_with_nothing_visible(
        spark: SparkSession, tls: ScramTlsKafka) -> None:
    """Alice may use every group, but only transactional ids under the prefix: a consumerGroup named outside it has a
    claim (``<group>.kafka-eos-claim``) she may not take. The decision is refused with the ACL to grant, nothing is
    visible or left open, the group is not moved; named under the prefix, the same job commits."""
    judge = KafkaTestCluster(tls.bootstrap_servers)
    tag = uuid.uuid4().hex[:6]
    source, sink, prefix = f"src-{tag}", f"sink-{tag}", f"{PREFIX}{tag}"
    create_topics(tls, source, sink)
    judge.produce_plain(source, [Sent(i % 3, None, f"r{i}".encode()) for i in range(30)])
    options = tls.client_options(ALICE, ALICE_PASSWORD)
    rows = (spark.read.format("kafka_eos").options(**options).option("subscribe", source).load()
            .selectExpr("value", "topic AS source_topic", "partition AS source_partition", "offset AS source_offset"))

    def write(group: str) -> None:
        (rows.write.format("kafka_eos").mode("append").options(**options).option("topic", sink)
         .option("transactional.id.prefix", prefix).option("consumerGroup", group).option("writeId", f"w-{group}").save())

    with pytest.raises(Exception) as refused:
        write(f"other-{tag}")
    message = str(refused.value)
    assert (f"--allow-principal User:{ALICE} --operation Write --operation Describe --transactional-id other-{tag}.kafka-eos-claim"
            in message), message[-3000:]
    assert "Nothing was committed" in message and ALICE_PASSWORD not in message
    judge.wait_until_stable(sink)
    assert judge.read_committed(sink) == []
    assert open_transactions_by_kafka(tls.bootstrap_servers, prefix + "-") == []
    assert set(judge.group_offsets(f"other-{tag}", source).values()) == {-1001}

    write(f"{prefix}-group")
    judge.wait_until_stable(sink)
    assert len(judge.read_committed(sink)) == 30


def test_the_cli_works_over_sasl_ssl(tls: ScramTlsKafka, capsys: pytest.CaptureFixture[str]) -> None:
    options = tls.client_options(ALICE, ALICE_PASSWORD)
    settings = [f"{key[len('kafka.'):]}={value}" for key, value in options.items() if key != "kafka.bootstrap.servers"]
    code = cli(["inspect", "--bootstrap-servers", options["kafka.bootstrap.servers"], "--prefix", f"{PREFIX}nothing-yet",
                *(arg for setting in settings for arg in ("--kafka", setting))])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert f"{PREFIX}nothing-yet" in out.out
    assert ALICE_PASSWORD not in out.out + out.err


@pytest.mark.parametrize("missing", ["DescribeConfigs", "TransactionalId"])
def test_a_missing_acl_is_named_before_any_task_writes(spark: SparkSession, tls: ScramTlsKafka, missing: str) -> None:
    """Bob may not read the brokers' configs (so without kafka.transaction.timeout.ms the sink cannot learn
    the timeout) and has no TransactionalId ACL: each is named, with the fix, and nothing is written."""
    judge = KafkaTestCluster(tls.bootstrap_servers)
    sink = f"sink-{uuid.uuid4().hex[:6]}"
    create_topics(tls, sink)
    options = {**tls.client_options(BOB, BOB_PASSWORD), **({"kafka.transaction.timeout.ms": "60000"} if missing == "TransactionalId" else {})}
    df = spark.range(10).selectExpr("CAST(id AS STRING) AS value")
    with pytest.raises(Exception) as refused:
        df.write.format("kafka_eos").mode("append").options(**options).option("topic", sink).option("transactional.id.prefix", f"{PREFIX}bob").save()
    message = str(refused.value)
    if missing == "DescribeConfigs":
        assert "--operation DescribeConfigs --cluster" in message and "kafka.transaction.timeout.ms" in message, message[-3000:]
    else:
        assert f"--operation Write --operation Describe --transactional-id {PREFIX}bob --resource-pattern-type prefixed" in message, message[-3000:]
    assert BOB_PASSWORD not in message
    assert judge.offsets(sink, OffsetSpec.latest(), committed=False) == {0: 0, 1: 0, 2: 0}


@pytest.mark.parametrize("user, password", [(CAROL, CAROL_PASSWORD), (DAVE, DAVE_PASSWORD)], ids=["prefixed-group-acl", "no-group-acl"])
def test_the_sink_needs_read_on_its_index_group_which_a_prefixed_group_acl_covers(
        spark: SparkSession, tls: ScramTlsKafka, user: str, password: str) -> None:
    """Carol's only group ACL is prefixed ``eos-``: it covers the index group ``eos-...kafka-eos-log-index`` of a
    prefix ``eos-...``, and her write commits. Dave has no group ACL: his write is refused, leaving nothing
    visible and nothing open."""
    judge = KafkaTestCluster(tls.bootstrap_servers)
    tag = uuid.uuid4().hex[:6]
    sink, prefix = f"sink-{tag}", f"{PREFIX}{user}-{tag}"
    create_topics(tls, sink)
    df = spark.range(30).selectExpr("CAST(id AS STRING) AS value")
    write = df.write.format("kafka_eos").mode("append").options(**tls.client_options(user, password)).option("topic", sink) \
        .option("transactional.id.prefix", prefix)
    if user == CAROL:
        write.save()
        # The second job finds the prefix's last record through its index entry, then reads it at its offset.
        write.save()
        judge.wait_until_stable(sink)
        assert len(judge.read_committed(sink)) == 60
    else:
        with pytest.raises(Exception) as refused:
            write.save()
        message = str(refused.value)
        assert "GROUP_AUTHORIZATION_FAILED" in message or "Group authorization failed" in message, message[-3000:]
        assert f"{prefix}.kafka-eos-log-index" in message, message[-3000:]
        assert judge.read_committed(sink) == []
    assert open_transactions_by_kafka(tls.bootstrap_servers, prefix + "-") == []
    assert_stable(judge, sink, "_kafka_eos_decisions")


@pytest.mark.long  # make test runs the notebooks (packaging/test_notebooks.py) and the security of both ends here
def test_the_pipeline_notebooks_kafka_options_widget_carries_security_to_both_ends(tls: ScramTlsKafka, tmp_path: Path) -> None:
    """The notebook's reader and sink both connect through the SASL_SSL listener with ``kafka_options`` only."""
    judge = KafkaTestCluster(tls.bootstrap_servers)
    tag = uuid.uuid4().hex[:6]
    source, sink, checkpoint = f"src-{tag}", f"sink-{tag}", str(tmp_path / "checkpoint")
    create_topics(tls, source, sink)
    sent = judge.produce_plain(source, [Sent(i % 3, None, f"n{i}".encode()) for i in range(90)])
    options = tls.client_options(ALICE, ALICE_PASSWORD)
    bootstrap = options.pop("kafka.bootstrap.servers")
    job = notebook_command(PROJECT / "notebooks" / "eos_pipeline.py", bootstrap_servers=bootstrap, source=source, sink=sink,
                           checkpoint=checkpoint, consumer_group=f"{PREFIX}g-{tag}", kafka_options=json.dumps(options))
    done = subprocess.run(job, capture_output=True, text=True, timeout=600, cwd=PROJECT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert ALICE_PASSWORD not in done.stdout + done.stderr
    judge.wait_until_stable(sink)
    assert sorted(r.value or b"" for r in judge.read_committed(sink)) == sorted(b"processed:" + (s.value or b"") for s in sent)
    assert open_transactions_by_kafka(tls.bootstrap_servers, derived_prefix(checkpoint) + "-") == []


@pytest.mark.parametrize("log_has_records", [False, True], ids=["empty-log", "log-with-records"])
def test_a_sink_that_may_not_read_the_decision_log_is_refused_with_nothing_visible_or_open(
        spark: SparkSession, tls: ScramTlsKafka, log_has_records: bool) -> None:
    """Without Read on the decision log, a sink is refused, naming the topic and the refusal: at planning, when
    the log has records to read; else at its decision (committing the index group's offset on the log needs
    Read too), after the tasks wrote (the high watermarks moved), whose records are then aborted. Either way
    nothing is visible and no transaction is left open."""
    judge = KafkaTestCluster(tls.bootstrap_servers)
    tag = uuid.uuid4().hex[:6]
    sink, prefix, log_topic = f"sink-{tag}", f"{PREFIX}erin-{tag}", f"{DECISION_LOG}-{tag}"  # Erin's DENY is prefixed
    create_topics(tls, sink, f"other-{tag}")
    df = spark.range(30).selectExpr("CAST(id AS STRING) AS value")
    if log_has_records:
        df.write.format("kafka_eos").mode("append").options(**tls.client_options(ALICE, ALICE_PASSWORD)).option("topic", f"other-{tag}") \
            .option("transactional.id.prefix", f"{PREFIX}alice-{tag}").option("decisionLogTopic", log_topic).save()
    write = df.write.format("kafka_eos").mode("append").options(**tls.client_options(ERIN, ERIN_PASSWORD)).option("topic", sink) \
        .option("transactional.id.prefix", prefix).option("decisionLogTopic", log_topic)
    with pytest.raises(Exception) as refused:
        write.save()
    message = str(refused.value)
    assert log_topic in message and ("TOPIC_AUTHORIZATION_FAILED" in message or "Topic authorization failed" in message), message[-3000:]
    assert ERIN_PASSWORD not in message
    written = sum(judge.offsets(sink, OffsetSpec.latest(), committed=False).values())
    assert written == 0 if log_has_records else written >= 30
    judge.wait_until_stable(sink)
    assert judge.read_committed(sink) == []
    assert open_transactions_by_kafka(tls.bootstrap_servers, prefix + "-") == []
    assert_stable(judge, sink, log_topic)
