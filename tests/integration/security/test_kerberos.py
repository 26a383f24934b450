"""Kerberos (GSSAPI) with a keytab for the coordinator's transaction session, against a real MIT KDC
(tests/harness/kdc.py) and a broker with a GSSAPI listener (tests/harness/kerberos_kafka.py).

The options are librdkafka's names with only ``kafka.sasl.kerberos.keytab`` and ``kafka.sasl.kerberos.principal``:
no kinit, no KRB5CCNAME. The realm's krb5.conf is given as KRB5_CONFIG (what /etc/krb5.conf is on a real host),
and its default ticket cache lies in the KDC's directory, where the test checks it was never written.

confluent-kafka's wheel is built without GSSAPI (and so is the compiled path), so the sink's tasks write their open
transactions over the broker's PLAINTEXT listener; the transaction session commits them over the GSSAPI one.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import OffsetSpec
from pyspark.sql import SparkSession

from spark_kafka_eos._internal.config.kafka_python import translate
from spark_kafka_eos._internal.config.writer import parse_writer_options
from spark_kafka_eos._internal.txn.session import TransactionSession, TxnState
from tests.harness.coordinator import committed_values, prepare, sink_options
from tests.harness.kafka import KafkaTestCluster
from tests.harness.kdc import Kdc, missing_tools
from tests.harness.kerberos_kafka import KerberosKafka

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.skipif(bool(missing_tools()), reason=f"the MIT Kerberos KDC is not installed (missing {', '.join(missing_tools())}): "
                       "apt-get install krb5-kdc krb5-admin-server krb5-user libkrb5-dev, or make test as root on Debian"),
    pytest.mark.skipif(importlib.util.find_spec("gssapi") is None, reason="python-gssapi is not installed in the venv: "
                       "make test installs it (pip install 'spark-kafka-eos[kerberos]', which needs libkrb5-dev)"),
]


@pytest.fixture(scope="module")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    with Kdc(tmp_path_factory.mktemp("kdc")) as kdc, pytest.MonkeyPatch.context() as patch:
        patch.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
        yield kdc


@pytest.fixture(scope="module")
def kerberos_kafka(kdc: Kdc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KerberosKafka]:
    with KerberosKafka(tmp_path_factory.mktemp("kerberos-kafka"), kdc) as broker:
        yield broker


@pytest.fixture(scope="module")
def client(kdc: Kdc) -> tuple[str, Path, Path]:
    """The principal ``client``, a keytab with its current keys, and a stale one (keys it no longer has)."""
    principal = kdc.add_principal("client")
    stale = kdc.keytab("client", kdc.directory / "client-stale.keytab")
    return principal, kdc.keytab("client", kdc.directory / "client.keytab"), stale


def _session_config(options: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in options.items() if key != "kafka.bootstrap.servers"}


def test_the_transaction_session_commits_with_only_a_keytab(kerberos_kafka: KerberosKafka, kdc: Kdc, client: tuple[str, Path, Path]) -> None:
    principal, keytab, _ = client
    plain = KafkaTestCluster(kerberos_kafka.bootstrap_servers)  # setup, the tasks and the independent consumer
    topic = plain.create_topic(2)
    tasks = [prepare(sink_options(plain, topic), partition, [f"p{partition}-{i}" for i in range(5)]) for partition in (0, 1)]
    options = kerberos_kafka.kerberos_options(principal, keytab)
    parse_writer_options({**options, "topic": topic, "transactional.id.prefix": "kerberos"}, streaming=False)  # the sink's up-front check

    with TransactionSession(kerberos_kafka.kerberos_servers, _session_config(options), request_timeout_s=10) as session:
        for task in tasks:
            assert task.transaction is not None
            assert session.describe([task.transaction.transactional_id])[task.transaction.transactional_id].state == TxnState.ONGOING
            session.commit(task.transaction)

    assert committed_values(plain, topic) == sorted(f"p{partition}-{i}".encode() for partition in (0, 1) for i in range(5))
    kdc_log = kdc.log_file.read_text()
    assert f"{principal} for kafka/localhost@{kdc.realm}" in kdc_log  # a service ticket for the broker, from the keytab's login
    assert not kdc.default_ccache.exists()  # no ticket went to the default cache: no kinit happened


def test_a_login_outlives_its_tickets(kerberos_kafka: KerberosKafka, kdc: Kdc) -> None:
    """Tickets of 10 s: a session opened after the first ticket expired logs in again from the keytab, by itself."""
    principal = kdc.add_principal("short-lived", max_life="10 seconds")
    keytab = kdc.keytab("short-lived", kdc.directory / "short-lived.keytab")
    config = _session_config(kerberos_kafka.kerberos_options(principal, keytab))
    for attempt in range(2):
        if attempt:
            time.sleep(11)
        with TransactionSession(kerberos_kafka.kerberos_servers, config, request_timeout_s=10) as session:
            assert session.describe(["never-used"])["never-used"].state == TxnState.NOT_FOUND  # the second: a ticket of after the sleep


@pytest.mark.spark
@pytest.mark.parametrize("which", ["stale keytab", "principal not in the keytab"])
def test_a_wrong_keytab_or_principal_is_refused_by_name_and_nothing_is_written(
    spark: SparkSession, kerberos_kafka: KerberosKafka, kdc: Kdc, client: tuple[str, Path, Path], which: str
) -> None:
    principal, keytab, stale = client
    options = (kerberos_kafka.kerberos_options(principal, stale) if which == "stale keytab"
               else kerberos_kafka.kerberos_options(f"nobody@{kdc.realm}", keytab))
    plain = KafkaTestCluster(kerberos_kafka.bootstrap_servers)
    topic = plain.create_topic(1)

    with pytest.raises(ValueError, match=r"sasl\.kerberos\.keytab") as refused:
        translate(_session_config(options))
    assert "cannot log in to Kerberos" in str(refused.value)
    # Through the sink: the writer's options are parsed in a Python worker of Spark, whose environment has KRB5_CONFIG
    # only if Spark started after the kdc fixture; without it the login fails too (no KDC for the realm), as refused.
    with pytest.raises(Exception, match=r"kafka\.sasl\.kerberos\.keytab") as failed:
        spark.range(5).selectExpr("CAST(id AS STRING) AS value").write.format("kafka_eos").mode("append") \
            .options(**options).option("topic", topic).option("transactional.id.prefix", f"kerberos-{topic}").save()
    assert "cannot log in to Kerberos" in str(failed.value)

    assert plain.read_committed(topic) == []
    assert plain.offsets(topic, OffsetSpec.latest(), committed=False) == {0: 0}  # not even an aborted record
    assert not kdc.default_ccache.exists()


@pytest.mark.skipif(shutil.which("kinit") is None, reason="kinit is not installed (apt-get install krb5-user)")
def test_a_principal_without_a_keytab_uses_its_ticket_from_a_kinit(kerberos_kafka: KerberosKafka, kdc: Kdc, client: tuple[str, Path, Path]) -> None:
    """Last in the module: it fills the default ticket cache, which the tests above check stays empty."""
    principal, keytab, _ = client
    config = {key: value for key, value in _session_config(kerberos_kafka.kerberos_options(principal, keytab)).items()
              if key != "kafka.sasl.kerberos.keytab"}
    with pytest.raises(ValueError, match=r"sasl\.kerberos\.principal.*kinit"):
        translate(config)
    subprocess.run(["kinit", "-k", "-t", str(keytab), principal], check=True, timeout=30)  # into krb5.conf's default cache
    try:
        with TransactionSession(kerberos_kafka.kerberos_servers, config, request_timeout_s=10) as session:
            assert session.describe(["never-used"])["never-used"].state == TxnState.NOT_FOUND
    finally:
        kdc.default_ccache.unlink(missing_ok=True)
