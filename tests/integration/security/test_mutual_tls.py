"""TLS with client certificates (mTLS): the reader, the sink's tasks, the coordinator's transaction session
(kafka-python) and the decision log all connect with the client's key pair given as a PKCS#12 keystore, as
inline PEM (as secret managers hand them out) or as PEM files with an encrypted key; no conversion by hand.
Without a client certificate the write fails, saying the TLS handshake failed and which settings to check, and
nothing is visible.

The broker is tests/harness/tls_kafka.py's :class:`MutualTlsKafka` (``ssl.client.auth=required``). The outcome
is judged through its PLAINTEXT listener: an independent read_committed consumer and Kafka's own
kafka-transactions tool."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.harness.kafka import KafkaTestCluster
from tests.harness.kafka_tools import assert_stable, open_transactions_by_kafka
from tests.harness.tls_kafka import MutualTlsKafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

RECORDS = 60


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MutualTlsKafka]:
    with MutualTlsKafka(tmp_path_factory.mktemp("mtls-kafka")) as broker:
        yield broker


def key_pair_options(mtls: MutualTlsKafka, form: str, tmp_path: Path) -> dict[str, str]:
    """The client's key pair (and the CA) in one of the forms librdkafka takes."""
    client = mtls.client
    if form == "pkcs12":
        return {"kafka.ssl.keystore.location": str(client.keystore), "kafka.ssl.keystore.password": client.keystore_password,
                "kafka.ssl.ca.location": str(mtls.ca_pem)}
    if form == "inline-pem":
        return {"kafka.ssl.certificate.pem": client.chain_pem, "kafka.ssl.key.pem": client.key_pem,
                "kafka.ssl.ca.pem": mtls.ca_pem.read_text()}
    certificate, key = tmp_path / "client.pem", tmp_path / "client.key"
    certificate.write_text(client.chain_pem)
    key.write_text(client.encrypted_key_pem)
    return {"kafka.ssl.certificate.location": str(certificate), "kafka.ssl.key.location": str(key),
            "kafka.ssl.key.password": client.key_password, "kafka.ssl.ca.location": str(mtls.ca_pem)}


@pytest.mark.parametrize("form", ["pkcs12", "inline-pem", "pem-files"])
def test_the_sink_and_the_reader_connect_with_the_clients_key_pair_in_each_form(
        spark: SparkSession, mtls: MutualTlsKafka, tmp_path: Path, form: str) -> None:
    judge = KafkaTestCluster(mtls.bootstrap_servers)  # the PLAINTEXT listener
    sink, prefix = judge.create_topic(2, "sink"), f"mtls-{form}-{uuid.uuid4().hex[:6]}"
    options = {**mtls.ssl_options(), **key_pair_options(mtls, form, tmp_path)}
    df = spark.range(RECORDS).selectExpr("CAST(id AS STRING) AS value")
    df.write.format("kafka_eos").mode("append").options(**options).option("topic", sink) \
        .option("transactional.id.prefix", prefix).save()

    judge.wait_until_stable(sink)
    assert sorted(int(r.value or b"") for r in judge.read_committed(sink)) == list(range(RECORDS))
    assert open_transactions_by_kafka(mtls.bootstrap_servers, prefix + "-") == []
    assert_stable(judge, sink, "_kafka_eos_decisions")

    read = spark.read.format("kafka_eos").options(**options).option("subscribe", sink).load()
    assert sorted(int(row.value) for row in read.selectExpr("CAST(value AS STRING) AS value").collect()) == list(range(RECORDS))
    plan = read._jdf.queryExecution().toString()
    for secret in (mtls.client.key_pem, mtls.client.keystore_password, mtls.client.key_password):
        assert secret not in plan


def test_without_a_client_certificate_the_write_fails_and_nothing_is_visible(spark: SparkSession, mtls: MutualTlsKafka) -> None:
    judge = KafkaTestCluster(mtls.bootstrap_servers)
    sink, prefix = judge.create_topic(2, "sink"), f"mtls-none-{uuid.uuid4().hex[:6]}"
    options = {**mtls.ssl_options(), "kafka.ssl.ca.location": str(mtls.ca_pem), "kafka.socket.timeout.ms": "10000"}
    with pytest.raises(Exception) as refused:
        spark.range(RECORDS).selectExpr("CAST(id AS STRING) AS value").write.format("kafka_eos").mode("append") \
            .options(**options).option("topic", sink).option("transactional.id.prefix", prefix).save()
    message = str(refused.value)
    assert "could not agree on TLS: the handshake failed" in message and "kafka.ssl.keystore.location" in message, message[-3000:]
    assert judge.read_committed(sink) == []
    assert open_transactions_by_kafka(mtls.bootstrap_servers, prefix + "-") == []
