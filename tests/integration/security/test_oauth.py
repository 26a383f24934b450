"""OAUTHBEARER with OIDC client credentials, for every client the connector opens: the reader,
the task producers, the coordinator's transaction session (kafka-python), the decision log and
the CLI. The broker validates tokens with Kafka's unsecured JWS validator; the token endpoint is
a loopback OIDC stand-in that counts its grants."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_kafka_eos._internal.ops import console as cli
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.oauth_kafka import CLIENT_SECRET, OAuthKafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.fixture(scope="module")
def oauth_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthKafka]:
    with OAuthKafka(tmp_path_factory.mktemp("oauth-kafka")) as broker:
        yield broker


def test_reads_writes_and_the_cli_over_oauthbearer(
    spark: SparkSession, oauth_kafka: OAuthKafka, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = KafkaTestCluster(oauth_kafka.bootstrap_servers)  # the PLAINTEXT listener, for setup and judging
    source, sink = admin.create_topic(2), admin.create_topic(2)
    admin.produce_plain(source, [Sent(i % 2, None, b"v%d" % i) for i in range(20)])
    options = oauth_kafka.oauth_options()
    prefix = f"oauth-{sink}"

    df = spark.read.format("kafka_eos").options(**options).option("subscribe", source).load()
    assert df.count() == 20
    df.select("value").write.format("kafka_eos").mode("append").options(**options).option("topic", sink) \
        .option("transactional.id.prefix", prefix).save()
    assert sorted(r.value for r in admin.read_committed(sink)) == sorted(b"v%d" % i for i in range(20))

    librdkafka_grants = [g for g in oauth_kafka.token_endpoint.grants if not g.startswith("Python-urllib")]
    session_grants = [g for g in oauth_kafka.token_endpoint.grants if g.startswith("Python-urllib")]
    assert librdkafka_grants and session_grants  # both kinds of client authenticated with a token

    settings = [arg for key, value in options.items() if key != "kafka.bootstrap.servers"
                for arg in ("--kafka", f"{key.removeprefix('kafka.')}={value}")]
    code = cli.main(["inspect", "--bootstrap-servers", options["kafka.bootstrap.servers"], "--prefix", prefix, *settings])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    assert "last record: complete" in out
    assert CLIENT_SECRET not in out + err
