"""Refused credentials: the reader, the sink and the CLI say that authentication failed, in seconds, and
never show the password. An unreachable cluster is still reported as unreachable.

Runs against a broker with a SASL/PLAIN listener (tests/harness/secured_kafka.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_kafka_eos.cli import main as cli
from tests.harness.secured_kafka import READER, SecuredKafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

WRONG = "not-the-reader-password-1234"
REFUSED = "refused the credentials of user '{user}' (PLAIN): authentication failed"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    with SecuredKafka(tmp_path_factory.mktemp("secured-kafka")) as broker:
        yield broker


def credentials(secured: SecuredKafka, user: str, password: str) -> dict[str, str]:
    return {**secured.reader_options(), "kafka.sasl.username": user, "kafka.sasl.password": password}


@pytest.mark.parametrize("user", [READER, "nobody"])
def test_the_reader_says_authentication_failed(spark: SparkSession, secured: SecuredKafka, user: str) -> None:
    with pytest.raises(Exception) as refused:
        spark.read.format("kafka_eos").options(**credentials(secured, user, WRONG)).option("subscribe", "orders").load().collect()
    message = str(refused.value)
    assert "KafkaEosAuthenticationError" in message and REFUSED.format(user=user) in message, message[-2000:]
    assert "Check kafka.sasl.username, kafka.sasl.password" in message
    assert WRONG not in message


def test_the_sink_says_authentication_failed_before_any_task_writes(spark: SparkSession, secured: SecuredKafka) -> None:
    df = spark.range(3).selectExpr("CAST(id AS STRING) AS value")
    with pytest.raises(Exception) as refused:
        (df.write.format("kafka_eos").mode("append").options(**credentials(secured, READER, WRONG))
         .option("topic", "orders").option("transactional.id.prefix", "refused").save())
    message = str(refused.value)
    assert "KafkaEosAuthenticationError" in message and REFUSED.format(user=READER) in message, message[-2000:]
    assert WRONG not in message


def test_the_cli_says_authentication_failed(secured: SecuredKafka, capsys: pytest.CaptureFixture[str]) -> None:
    settings = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", f"sasl.username={READER}", f"sasl.password={WRONG}"]
    code = cli(["inspect", "--bootstrap-servers", f"127.0.0.1:{secured.sasl_port}", "--prefix", "refused",
                *(arg for setting in settings for arg in ("--kafka", setting))])
    out = capsys.readouterr()
    assert code == 2
    assert REFUSED.format(user=READER) in out.err, out.err
    assert WRONG not in out.out + out.err


def test_an_unreachable_cluster_is_still_reported_as_unreachable(spark: SparkSession) -> None:
    with pytest.raises(Exception, match="did not answer 'list topics' within 3s") as unreachable:
        (spark.read.format("kafka_eos").option("kafka.bootstrap.servers", "127.0.0.1:1").option("subscribe", "orders")
         .option("kafka.socket.timeout.ms", "3000").load().collect())
    assert "authentication" not in str(unreachable.value)
