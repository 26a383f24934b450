"""Refused credentials: the reader, the sink and the CLI say that authentication failed, in seconds, and
never show the password. An unreachable cluster is still reported as unreachable (by the CLI in one line, within
its --timeout). The CLI takes secrets from a properties file or the environment, as Kafka's tools do.

Runs against a broker with a SASL/PLAIN listener (tests/harness/secured_kafka.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_kafka_eos.cli import main as cli
from tests.harness.secured_kafka import READER, READER_PASSWORD, SecuredKafka

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


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed ``kafka-eos`` command, as an operator runs it (its command line is what ``ps`` shows)."""
    return subprocess.run([str(Path(sys.executable).with_name("kafka-eos")), *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_the_cli_takes_its_secrets_from_a_properties_file_as_kafkas_tools_do(secured: SecuredKafka, tmp_path: Path) -> None:
    """A Kafka tools' --command-config file, JAAS line and all: its credentials are the ones used (the wrong
    password is refused; the right one authenticates, then meets the ACLs), and no secret is on the command line."""
    def properties(password: str) -> Path:
        path = tmp_path / f"client-{password[:5]}.properties"
        path.write_text("# as for kafka-topics.sh --command-config\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
                        f'    username="{READER}" password="{password}";\n')
        return path

    bootstrap = f"127.0.0.1:{secured.sasl_port}"
    refused = run_cli("inspect", "--bootstrap-servers", bootstrap, "--prefix", "p", "--command-config", str(properties(WRONG)))
    assert refused.returncode == 2 and REFUSED.format(user=READER) in refused.stderr, refused.stderr
    assert WRONG not in refused.stdout + refused.stderr
    accepted = run_cli("--command-config", str(properties(READER_PASSWORD)), "inspect", "--bootstrap-servers", bootstrap,
                       "--prefix", "p")
    assert f"refused User:{READER} access to topic(s)" in accepted.stderr, accepted.stderr  # authenticated, then the ACLs
    assert len(accepted.stderr.strip().splitlines()) == 1, accepted.stderr
    assert READER_PASSWORD not in accepted.stdout + accepted.stderr


def test_the_cli_takes_its_secrets_from_the_environment(secured: SecuredKafka) -> None:
    variables = {"KAFKA_EOS_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_EOS_KAFKA_SASL_MECHANISM": "PLAIN",
                 "KAFKA_EOS_KAFKA_SASL_USERNAME": READER, "KAFKA_EOS_KAFKA_SASL_PASSWORD": WRONG}
    refused = run_cli("--json", "inspect", "--bootstrap-servers", f"127.0.0.1:{secured.sasl_port}", "--prefix", "p", env=variables)
    assert refused.returncode == 2 and REFUSED.format(user=READER) in json.loads(refused.stdout)["error"], refused.stdout
    assert WRONG not in refused.stdout + refused.stderr


def test_the_cli_fails_on_an_unreachable_cluster_in_one_line_within_its_timeout() -> None:
    """Without --timeout the request timeout was librdkafka's 60 s, with thousands of librdkafka log lines on stderr."""
    began = time.monotonic()
    done = run_cli("list", "--bootstrap-servers", "127.0.0.1:1", "--timeout", "3")
    took = time.monotonic() - began
    assert done.returncode == 2
    assert done.stderr.startswith("error: Kafka at 127.0.0.1:1") and "within 3s" in done.stderr, done.stderr[:2000]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr[:2000]
    assert took < 20, f"{took:.0f} s: not bounded by --timeout 3"
    verbose = run_cli("list", "--bootstrap-servers", "127.0.0.1:1", "--timeout", "2", "--verbose")
    assert "Connection refused" in verbose.stderr and len(verbose.stderr.splitlines()) > 1
