"""Option parsing and validation: pure logic, no broker."""

from __future__ import annotations

import pytest

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos.errors import KafkaEosOptionError

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"}


def parse(streaming: bool = False, **extra: str) -> object:
    options = {**BASE, **{k.replace("__", "."): v for k, v in extra.items()}}
    # Spark lower-cases option keys before the data source sees them.
    return parse_reader_options({k.lower(): v for k, v in options.items()}, streaming=streaming)


def error_of(streaming: bool = False, drop: tuple[str, ...] = (), **extra: str) -> KafkaEosOptionError:
    options = {k: v for k, v in BASE.items() if k not in drop}
    options.update({k.replace("__", "."): v for k, v in extra.items()})
    with pytest.raises(KafkaEosOptionError) as info:
        parse_reader_options({k.lower(): v for k, v in options.items()}, streaming=streaming)
    return info.value


def test_defaults_follow_sparks_kafka_source() -> None:
    batch = parse()
    assert batch.starting.kind == "earliest" and batch.ending is not None and batch.ending.kind == "latest"
    assert batch.isolation_level == "read_committed"
    assert batch.fail_on_data_loss and not batch.include_headers
    stream = parse(streaming=True)
    assert stream.starting.kind == "latest" and stream.ending is None


def test_consumer_config_is_read_committed_and_never_commits() -> None:
    config = parse(kafka__fetch__max__bytes="1048576").consumer_config()
    assert config["isolation.level"] == "read_committed"
    assert config["enable.auto.commit"] is False and config["auto.offset.reset"] == "error"
    assert config["fetch.max.bytes"] == "1048576"
    assert "fetch.max.bytes" not in parse(kafka__fetch__max__bytes="1").admin_config()
    # Asking for a missing topic by name must never create it.
    assert parse().admin_config()["allow.auto.create.topics"] is False


@pytest.mark.parametrize("name", ["max.partition.fetch.bytes", "fetch.message.max.bytes"])
def test_partition_fetch_size_defaults_to_8_mib_unless_the_user_sets_either_name(name: str) -> None:
    assert parse().consumer_config()["max.partition.fetch.bytes"] == str(8 * 1024 * 1024)
    config = parse(**{"kafka__" + name.replace(".", "__"): "65536"}).consumer_config()
    # librdkafka takes the two names as one setting: the user's must be the only one given.
    assert config[name] == "65536"
    assert [key for key in config if key in ("max.partition.fetch.bytes", "fetch.message.max.bytes")] == [name]


def test_prefetch_queue_holds_one_fetch_or_one_arrow_batch_whichever_is_smaller() -> None:
    assert parse().consumer_config()["queued.max.messages.kbytes"] == "8192"
    assert parse(maxBytesPerBatch=str(2 * 1024 * 1024)).consumer_config()["queued.max.messages.kbytes"] == "2048"
    assert parse(kafka__queued__max__messages__kbytes="65536").consumer_config()["queued.max.messages.kbytes"] == "65536"


def test_bootstrap_servers_missing_names_the_option() -> None:
    err = error_of(drop=("kafka.bootstrap.servers",))
    assert err.option == "kafka.bootstrap.servers" and "Fix:" in str(err)


def test_two_subscription_options_are_refused() -> None:
    err = error_of(subscribePattern="ord.*")
    assert "subscribe and subscribePattern" in str(err)
    assert "exactly one" in str(error_of(drop=("subscribe",)))


@pytest.mark.parametrize(
    "option,value,fragment",
    [
        ("startingOffsets", '{"orders": {"0": 1', "not valid JSON"),
        ("startingOffsets", '{"orders": [0, 1]}', "must map partitions"),
        ("startingOffsets", '{"orders": {"zero": 1}}', "partition numbers"),
        ("startingOffsets", "newest", "use earliest, latest, group (with consumerGroup), or JSON"),
        ("startingOffsets", "group", "no consumerGroup is set"),
        ("endingOffsets", '{"orders": {"0": -3}}', "offset -3"),
        ("assign", '{"orders": "0"}', "list of partition numbers"),
        ("startingTimestamp", "yesterday", "milliseconds since the epoch"),
        ("startingOffsetsByTimestamp", '{"orders": {"0": -5}}', "negative timestamp"),
        ("minPartitions", "0", "greater than 0"),
        ("failOnDataLoss", "yes", "true or false"),
        ("maxTriggerDelay", "soon", "duration"),
        ("startingOffsetsByTimestampStrategy", "nearest", "'error'"),
    ],
)
def test_malformed_values_name_the_option(option: str, value: str, fragment: str) -> None:
    extra = {option: value}
    if option == "assign":
        err = error_of(drop=("subscribe",), **extra)
    else:
        err = error_of(**extra)
    assert err.option == option
    assert fragment in str(err)


def test_batch_reads_refuse_starting_at_latest_and_ending_at_earliest() -> None:
    assert error_of(startingOffsets="latest").option == "startingOffsets"
    assert error_of(startingOffsets='{"orders":{"0":-1}}').option == "startingOffsets"
    assert error_of(endingOffsets="earliest").option == "endingOffsets"


def test_streams_refuse_ending_offsets() -> None:
    assert error_of(streaming=True, endingOffsets="latest").option == "endingOffsets"


@pytest.mark.parametrize(
    "setting,equivalent",
    [
        ("sasl.jaas.config", "kafka.sasl.username"),
        ("ssl.truststore.location", "kafka.ssl.ca.location"),
        ("max.poll.records", "maxRecordsPerBatch"),
    ],
)
def test_java_only_settings_name_the_librdkafka_equivalent(setting: str, equivalent: str) -> None:
    err = error_of(**{f"kafka.{setting}": "x"})
    assert err.option == f"kafka.{setting}" and equivalent in str(err)


@pytest.mark.parametrize("setting", ["enable.auto.commit", "auto.offset.reset", "key.deserializer", "value.deserializer"])
def test_unsafe_settings_are_refused(setting: str) -> None:
    assert error_of(**{f"kafka.{setting}": "x"}).option == f"kafka.{setting}"


@pytest.mark.parametrize("typo,meant", [("startingOffset", "startingOffsets"), ("failOnDataLos", "failOnDataLoss"), ("includeHeader", "includeHeaders")])
def test_typos_of_known_options_are_refused(typo: str, meant: str) -> None:
    err = error_of(**{typo: "x"})
    assert f"did you mean '{meant}'" in str(err)


def test_unknown_unrelated_options_are_ignored() -> None:
    assert parse(somethingElseEntirely="1").subscription.topics == ("orders",)


def test_offsets_json_and_timestamps_parse() -> None:
    opts = parse(startingOffsets='{"orders":{"0":5,"1":-2}}', endingOffsetsByTimestamp='{"orders":{"0":1000,"1":2000}}')
    assert opts.starting.offsets == {("orders", 0): 5, ("orders", 1): -2}
    assert opts.ending is not None and opts.ending.timestamps == {("orders", 0): 1000, ("orders", 1): 2000}
    # startingTimestamp wins over startingOffsetsByTimestamp and startingOffsets, as in Spark.
    both = parse(startingTimestamp="1700000000000", startingOffsets="earliest")
    assert both.starting.kind == "timestamp" and both.starting.timestamp == 1_700_000_000_000


def test_starting_at_a_consumer_groups_offsets() -> None:
    opts = parse(startingOffsets="group", consumerGroup="backfill")
    assert opts.starting.kind == "group" and opts.starting.group == "backfill"


def test_assign_and_pattern() -> None:
    assigned = parse_reader_options({"kafka.bootstrap.servers": "h:1", "assign": '{"b":[1,0],"a":[2]}'}, streaming=False)
    assert assigned.subscription.partitions == (("a", 2), ("b", 0), ("b", 1))
    pattern = parse_reader_options({"kafka.bootstrap.servers": "h:1", "subscribepattern": "ord.*"}, streaming=True)
    assert pattern.subscription.pattern == "ord.*"


def test_a_topic_or_partition_named_twice_is_read_once() -> None:
    # Spark treats the subscription as a set of partitions; reading one twice duplicates records.
    assert parse(subscribe="a, b,a").subscription.topics == ("a", "b")
    assigned = parse_reader_options({"kafka.bootstrap.servers": "h:1", "assign": '{"t":[0,0,1]}'}, streaming=False)
    assert assigned.subscription.partitions == (("t", 0), ("t", 1))


def test_offset_lookups_wait_like_sparks_between_attempts() -> None:
    # 10 ms apart, four attempts end inside a leader election; Spark waits 1 s (fetchOffset.retryIntervalMs).
    assert parse().fetch_offset_retry_interval_ms == 1000
    assert parse(**{"fetchOffset.retryIntervalMs": "50"}).fetch_offset_retry_interval_ms == 50


def test_min_above_max_offsets_per_trigger_is_refused() -> None:
    err = error_of(streaming=True, maxOffsetsPerTrigger="10", minOffsetsPerTrigger="20")
    assert err.option == "minOffsetsPerTrigger"


def test_secrets_never_appear_in_repr() -> None:
    opts = parse(kafka__sasl__password="hunter2-secret", kafka__ssl__key__password="k3y-pass", kafka__sasl__username="bob")
    text = repr(opts) + str(opts)
    assert "hunter2-secret" not in text and "k3y-pass" not in text
    assert "bob" in text
