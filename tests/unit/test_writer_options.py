"""Sink option parsing and validation: pure logic, no broker."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from spark_kafka_eos._internal.config.writer import (
    DEFAULT_DECISION_LOG_TOPIC,
    WriterOptions,
    derived_prefix,
    parse_writer_options,
)
from spark_kafka_eos.errors import KafkaEosOptionError

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out", "transactional.id.prefix": "orders-etl"}


def _options(drop: tuple[str, ...], extra: dict[str, str]) -> dict[str, str]:
    options = {k: v for k, v in BASE.items() if k not in drop}
    options.update({k.replace("__", "."): v for k, v in extra.items()})
    # Spark lower-cases option keys before the data source sees them.
    return {k.lower(): v for k, v in options.items()}


def parse(streaming: bool = False, drop: tuple[str, ...] = (), **extra: str) -> WriterOptions:
    return parse_writer_options(_options(drop, extra), streaming=streaming)


def error_of(streaming: bool = False, drop: tuple[str, ...] = (), **extra: str) -> KafkaEosOptionError:
    with pytest.raises(KafkaEosOptionError) as info:
        parse_writer_options(_options(drop, extra), streaming=streaming)
    assert "Fix:" in str(info.value)
    return info.value


def test_defaults() -> None:
    opts = parse()
    assert (opts.bootstrap_servers, opts.topic, opts.prefix, opts.prefix_source) == ("127.0.0.1:9092", "out", "orders-etl", "option")
    assert opts.decision_log_topic == DEFAULT_DECISION_LOG_TOPIC
    assert opts.consumer_group is None and opts.transaction_timeout_ms is None
    assert parse(drop=("topic",)).topic is None


def test_sink_options_are_read_case_insensitively() -> None:
    opts = parse(decisionLogTopic="_decisions.orders", consumerGroup="orders-etl-group", kafka__transaction__timeout__ms="120000")
    assert opts.decision_log_topic == "_decisions.orders" and opts.consumer_group == "orders-etl-group"
    assert opts.transaction_timeout_ms == 120_000


def test_producer_config_is_transactional_and_keeps_user_tuning() -> None:
    config = parse(kafka__linger__ms="20", kafka__compression__type="zstd").producer_config("orders-etl-3-1", 90_000)
    assert config["transactional.id"] == "orders-etl-3-1" and config["transaction.timeout.ms"] == 90_000
    assert config["enable.idempotence"] is True and config["acks"] == "all"
    assert config["bootstrap.servers"] == "127.0.0.1:9092"
    assert config["linger.ms"] == "20" and config["compression.type"] == "zstd"
    assert config["partitioner"] == "murmur2_random"  # the Java client's partitioner, as Spark's sink uses
    assert "transaction.timeout.ms" not in parse(kafka__transaction__timeout__ms="60000").kafka_config
    assert parse().producer_config("p-0-0", 1000)["linger.ms"] == 5


def test_missing_bootstrap_servers_names_the_option() -> None:
    assert error_of(drop=("kafka.bootstrap.servers",)).option == "kafka.bootstrap.servers"


@pytest.mark.parametrize("prefix", ["", "orders etl", "orders/etl", "ördérs", "x" * 201])
def test_bad_prefixes_are_refused(prefix: str) -> None:
    err = error_of(**{"transactional.id.prefix": prefix})
    assert err.option == "transactional.id.prefix" and "letters, digits" in str(err)


def test_longest_prefix_is_accepted() -> None:
    assert parse(**{"transactional.id.prefix": "a.b_c-" + "x" * 194}).prefix.endswith("x")


@pytest.mark.parametrize(
    "setting,value,fragment",
    [
        ("transactional.id", "mine", "transactional.id.prefix"),
        ("enable.idempotence", "false", "idempotent"),
        ("acks", "1", "acks=all"),
        ("request.required.acks", "0", "acks=all"),
        ("key.serializer", "org.apache.kafka.common.serialization.StringSerializer", "cast the key column"),
        ("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer", "cast the value column"),
        ("sasl.jaas.config", "org.apache...required;", "kafka.sasl.username"),
        ("ssl.truststore.location", "/etc/truststore.jks", "kafka.ssl.ca.location"),
        ("auto.offset.reset", "earliest", "only produces"),
        ("statistics.interval.ms", "1000", "producer id and epoch"),
        ("transaction.timeout.ms", "-5", "greater than 0"),
        ("transaction.timeout.ms", "soon", "greater than 0"),
    ],
)
def test_unsafe_or_java_only_kafka_settings_are_refused(setting: str, value: str, fragment: str) -> None:
    err = error_of(**{f"kafka.{setting}": value})
    assert err.option == f"kafka.{setting}" and fragment in str(err)


@pytest.mark.parametrize("value", ["all", "-1", "ALL"])
def test_acks_all_is_accepted(value: str) -> None:
    assert parse(kafka__acks=value).producer_config("p-0-0", 1000)["acks"] == "all"


@pytest.mark.parametrize(
    "setting,value",
    [("no.such.setting", "1"), ("linger.ms", "soon"), ("max.in.flight.requests.per.connection", "10"), ("message.max.bytes", "10")],
)
def test_librdkafka_refusals_are_raised_on_the_driver_naming_the_setting(setting: str, value: str) -> None:
    err = error_of(**{f"kafka.{setting}": value})
    assert err.option == f"kafka.{setting}" and "librdkafka" in str(err)


def test_message_timeout_above_the_transaction_timeout_is_refused() -> None:
    err = error_of(kafka__message__timeout__ms="120000", kafka__transaction__timeout__ms="60000")
    assert err.option == "kafka.message.timeout.ms" and "transaction.timeout.ms" in str(err)


def test_a_tls_file_the_drivers_transaction_session_cannot_read_is_named_before_any_data_moves() -> None:
    # The sink's driver connects too (its transaction session and admin client read the same settings): a file shipped
    # with --files to the executors only would fail its commit after the tasks wrote, so it is refused up front.
    error = error_of(kafka__ssl__ca__location="./ca-only-on-executors.pem", kafka__security__protocol="SSL")
    assert error.option == "kafka.ssl.ca.location"
    assert "No such file or directory" in str(error) and "driver" in str(error)


@pytest.mark.parametrize("option", ["topic", "decisionLogTopic"])
@pytest.mark.parametrize("name", ["", "a topic", "..", "t" * 250])
def test_invalid_topic_names_are_refused(option: str, name: str) -> None:
    assert error_of(**{option: name}).option == option


def test_empty_consumer_group_is_refused() -> None:
    assert error_of(consumerGroup=" ").option == "consumerGroup"


@pytest.mark.parametrize("typo,meant", [("topics", "topic"), ("transactional.id.prefx", "transactional.id.prefix"), ("decisionLogTopics", "decisionLogTopic")])
def test_typos_of_sink_options_are_refused(typo: str, meant: str) -> None:
    assert f"did you mean '{meant}'" in str(error_of(**{typo: "x"}))


def test_streaming_prefix_defaults_to_a_digest_of_the_checkpoint() -> None:
    opts = parse(streaming=True, drop=("transactional.id.prefix",), checkpointLocation="/data/checkpoints/orders")
    assert opts.prefix_source == "checkpointLocation"
    assert opts.prefix == derived_prefix("/data/checkpoints/orders")
    assert opts.prefix.startswith("kafka-eos-") and len(opts.prefix) == len("kafka-eos-") + 16
    again = parse(streaming=True, drop=("transactional.id.prefix",), checkpointLocation="/data/checkpoints/orders")
    assert again.prefix == opts.prefix


@pytest.mark.parametrize("spelling", ["/data/ckpt", "/data/ckpt/", "file:///data/ckpt", "file:/data/ckpt", "/data//ckpt", " /data/ckpt ",
                                      "dbfs:/data/ckpt", "dbfs:///data/ckpt", "/dbfs/data/ckpt", "DBFS:/data/ckpt/"])
def test_spellings_of_one_checkpoint_give_one_prefix(spelling: str) -> None:
    assert derived_prefix(spelling) == derived_prefix("/data/ckpt")


@pytest.mark.parametrize("one, other", [
    ("s3://bucket/data/ckpt", "s3a://bucket/data/ckpt"), ("s3://bucket/data/ckpt", "s3n://Bucket/data/ckpt/"),
    ("abfs://c@acct.dfs.core.windows.net/ckpt", "abfss://c@acct.dfs.core.windows.net/ckpt"),
    ("wasb://c@acct.blob.core.windows.net/ckpt", "wasbs://c@acct.blob.core.windows.net/ckpt"),
])
def test_scheme_aliases_of_one_store_give_one_prefix(one: str, other: str) -> None:
    assert derived_prefix(one) == derived_prefix(other)


def test_a_link_to_a_local_checkpoint_gives_its_prefix(tmp_path: Path) -> None:
    (tmp_path / "real" / "ckpt").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert derived_prefix(str(tmp_path / "link" / "ckpt")) == derived_prefix(str(tmp_path / "real" / "ckpt"))


@pytest.mark.parametrize("other", ["/data/ckpt2", "/data/other/ckpt", "hdfs://nn:8020/data/ckpt", "s3a://bucket/data/ckpt",
                                   "gs://bucket/data/ckpt"])
def test_different_checkpoints_give_different_prefixes(other: str) -> None:
    assert derived_prefix(other) != derived_prefix("/data/ckpt")


def test_explicit_prefix_wins_over_checkpoint() -> None:
    opts = parse(streaming=True, checkpointLocation="/data/ckpt")
    assert (opts.prefix, opts.prefix_source) == ("orders-etl", "option")


def test_streaming_without_prefix_or_checkpoint_names_both() -> None:
    err = error_of(streaming=True, drop=("transactional.id.prefix",))
    assert "transactional.id.prefix" in err.option and "checkpointLocation" in err.option


def test_batch_write_without_prefix_is_refused_even_with_a_checkpoint() -> None:
    err = error_of(drop=("transactional.id.prefix",), checkpointLocation="/data/ckpt")
    assert err.option == "transactional.id.prefix" and "batch write" in str(err)


def test_secrets_never_appear_in_repr_or_errors() -> None:
    opts = parse(kafka__sasl__password="hunter2-secret", kafka__ssl__key__password="k3y-pass", kafka__sasl__username="bob")
    text = repr(opts) + str(opts)
    assert "hunter2-secret" not in text and "k3y-pass" not in text and "bob" in text
    # librdkafka quotes a refused value; a secret value must not leak through that message.
    err = error_of(kafka__sasl__password="zstd-secret", kafka__compression__type="zstd-secret")
    assert "zstd-secret" not in str(err)


def test_options_survive_pickling_to_executors() -> None:
    opts = parse(kafka__linger__ms="7", consumerGroup="g")
    assert pickle.loads(pickle.dumps(opts)) == opts


def test_a_relative_checkpoint_path_derives_the_prefix_of_its_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert derived_prefix("checkpoints/orders") == derived_prefix(str(tmp_path / "checkpoints" / "orders"))
    assert derived_prefix("./checkpoints/orders/") == derived_prefix(f"file://{tmp_path}/checkpoints/orders")


def test_write_id_is_for_batch_writes_only() -> None:
    assert parse_writer_options({**BASE, "writeId": " 2026-11-22 "}, streaming=False).write_id == "2026-11-22"
    with pytest.raises(KafkaEosOptionError, match="Option 'writeId': is for batch writes"):
        parse_writer_options({**BASE, "writeId": "x", "checkpointLocation": "/c"}, streaming=True)
    with pytest.raises(KafkaEosOptionError, match="Option 'writeId': is 'a b'"):
        parse_writer_options({**BASE, "writeId": "a b"}, streaming=False)


@pytest.mark.parametrize("timeout", ["1000", "10000", "19999"])
def test_a_transaction_timeout_shorter_than_twice_the_decision_margin_is_refused(timeout: str) -> None:
    with pytest.raises(KafkaEosOptionError, match=f"kafka.transaction.timeout.ms': is {timeout} ms: every epoch must be decided 10 s"):
        parse(kafka__transaction__timeout__ms=timeout)
    assert parse(kafka__transaction__timeout__ms="20000").transaction_timeout_ms == 20000


def test_allow_new_prefix_is_a_flag() -> None:
    assert not parse(streaming=True).allow_new_prefix
    assert parse(streaming=True, allowNewPrefix="true").allow_new_prefix
    with pytest.raises(KafkaEosOptionError, match="Option 'allowNewPrefix': is 'yes'"):
        parse(streaming=True, allowNewPrefix="yes")
