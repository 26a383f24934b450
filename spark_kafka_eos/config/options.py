"""The rules every set of ``kafka_eos`` options shares, reader's and writer's alike.

Spark hands options over as a case-insensitive dict of strings. Here: the names of every known option
(so that a typo is refused with "did you mean ..."), the ``kafka.*`` pass-through to librdkafka, which
refuses settings that only exist in the Java client (naming the librdkafka equivalent) and settings that
would break the guarantees, and the required ``kafka.bootstrap.servers``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping

from spark_kafka_eos.config.connection import KafkaConnection
from spark_kafka_eos.config.librdkafka import JAVA_ONLY_SETTINGS
from spark_kafka_eos.errors import KafkaEosOptionError

# Option names, as documented (camelCase); Spark lower-cases the keys it passes.
SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribePattern"
ASSIGN = "assign"
STARTING_OFFSETS = "startingOffsets"
ENDING_OFFSETS = "endingOffsets"
STARTING_TIMESTAMP = "startingTimestamp"
ENDING_TIMESTAMP = "endingTimestamp"
STARTING_OFFSETS_BY_TIMESTAMP = "startingOffsetsByTimestamp"
ENDING_OFFSETS_BY_TIMESTAMP = "endingOffsetsByTimestamp"
STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY = "startingOffsetsByTimestampStrategy"
FAIL_ON_DATA_LOSS = "failOnDataLoss"
MIN_PARTITIONS = "minPartitions"
MAX_RECORDS_PER_PARTITION = "maxRecordsPerPartition"
MAX_OFFSETS_PER_TRIGGER = "maxOffsetsPerTrigger"
MIN_OFFSETS_PER_TRIGGER = "minOffsetsPerTrigger"
MAX_TRIGGER_DELAY = "maxTriggerDelay"
INCLUDE_HEADERS = "includeHeaders"
GROUP_ID_PREFIX = "groupIdPrefix"
KAFKA_CONSUMER_POLL_TIMEOUT_MS = "kafkaConsumer.pollTimeoutMs"
FETCH_OFFSET_NUM_RETRIES = "fetchOffset.numRetries"
FETCH_OFFSET_RETRY_INTERVAL_MS = "fetchOffset.retryIntervalMs"
MAX_RECORDS_PER_BATCH = "maxRecordsPerBatch"
MAX_BYTES_PER_BATCH = "maxBytesPerBatch"
READ_ENGINE = "readEngine"
CONSUMER_GROUP = "consumerGroup"
PROGRESS_GROUP = "progressGroup"
GC_FREEZE = "gcFreeze"
MIN_RECORDS_PER_PARTITION = "minRecordsPerPartition"

# The sink's options, and Spark's own that reach it.
TOPIC = "topic"
TRANSACTIONAL_ID_PREFIX = "transactional.id.prefix"
CHECKPOINT_LOCATION = "checkpointLocation"
PATH = "path"
DECISION_LOG_TOPIC = "decisionLogTopic"
WRITE_ID = "writeId"
ALLOW_NEW_PREFIX = "allowNewPrefix"
WRITE_ENGINE = "writeEngine"

READER_OPTIONS = (
    SUBSCRIBE,
    SUBSCRIBE_PATTERN,
    ASSIGN,
    STARTING_OFFSETS,
    ENDING_OFFSETS,
    STARTING_TIMESTAMP,
    ENDING_TIMESTAMP,
    STARTING_OFFSETS_BY_TIMESTAMP,
    ENDING_OFFSETS_BY_TIMESTAMP,
    STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY,
    FAIL_ON_DATA_LOSS,
    MIN_PARTITIONS,
    MAX_RECORDS_PER_PARTITION,
    MIN_RECORDS_PER_PARTITION,
    MAX_OFFSETS_PER_TRIGGER,
    MIN_OFFSETS_PER_TRIGGER,
    MAX_TRIGGER_DELAY,
    INCLUDE_HEADERS,
    GROUP_ID_PREFIX,
    KAFKA_CONSUMER_POLL_TIMEOUT_MS,
    FETCH_OFFSET_NUM_RETRIES,
    FETCH_OFFSET_RETRY_INTERVAL_MS,
    MAX_RECORDS_PER_BATCH,
    MAX_BYTES_PER_BATCH,
    READ_ENGINE,
    CONSUMER_GROUP,
    PROGRESS_GROUP,
    GC_FREEZE,
)
# Options of the sink and of Spark itself: known, so never reported as typos of a source option.
WRITER_AND_SPARK_OPTIONS = (
    TOPIC,
    TRANSACTIONAL_ID_PREFIX,
    CHECKPOINT_LOCATION,
    PATH,
    DECISION_LOG_TOPIC,
    WRITE_ID,
    ALLOW_NEW_PREFIX,
    WRITE_ENGINE,
)
_CANONICAL = {name.lower(): name for name in READER_OPTIONS + WRITER_AND_SPARK_OPTIONS}

# Consumer settings the reader sets or replaces itself, and what to use instead; the writer refuses them as
# consumer settings.
READER_OWNED_SETTINGS: Mapping[str, str] = {
    "enable.auto.commit": "the source tracks offsets in Spark's checkpoint and never commits them "
    "itself; remove kafka.enable.auto.commit",
    "auto.offset.reset": "use startingOffsets (and failOnDataLoss for offsets lost to retention) "
    "instead of kafka.auto.offset.reset",
    "key.deserializer": "the source always returns key as binary; cast it or use from_json/from_avro in Spark",
    "value.deserializer": "the source always returns value as binary; cast it or use from_json/from_avro in Spark",
    "enable.partition.eof": "remove it: the source sets it, to know when a range ending in aborted records is read",
    "enable.auto.offset.store": "remove it: the source commits no offsets",
}


def canonical_name(key: str) -> str:
    """The documented spelling of a known option, from its lower-cased key."""
    return _CANONICAL[key]


def parse_kafka_settings(opts: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options without their prefix, refusing Java-only and unsafe settings."""
    settings: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka."):
            continue
        setting = key[len("kafka."):]
        if setting in JAVA_ONLY_SETTINGS:
            raise KafkaEosOptionError(
                key, "is a Java Kafka client setting; kafka_eos uses librdkafka, which does not know it.",
                JAVA_ONLY_SETTINGS[setting] + ".",
            )
        if setting in READER_OWNED_SETTINGS:
            raise KafkaEosOptionError(key, "is not supported by the kafka_eos source.", READER_OWNED_SETTINGS[setting] + ".")
        settings[setting] = value
    return settings


def parse_connection(settings: dict[str, str]) -> KafkaConnection:
    """The connection of the parsed ``kafka.*`` settings: removes ``bootstrap.servers`` (required) from
    ``settings`` and takes the connection settings, which stay in ``settings`` for the clients' own configuration."""
    bootstrap = settings.pop("bootstrap.servers", "").strip()
    if not bootstrap:
        raise KafkaEosOptionError(
            "kafka.bootstrap.servers", "is missing.", "add .option('kafka.bootstrap.servers', 'host1:9092,host2:9092')."
        )
    return KafkaConnection.of(bootstrap, settings)


def reject_typos(opts: Mapping[str, str]) -> None:
    """Refuse an option that is not ours but looks like a typo of one (lower-cased keys)."""
    for key in opts:
        if key in _CANONICAL or key.startswith("kafka.") or key.startswith("spark."):
            continue
        close = difflib.get_close_matches(key, list(_CANONICAL), n=1, cutoff=0.8)
        if close:
            raise KafkaEosOptionError(key, "is not a kafka_eos option.", f"did you mean '{_CANONICAL[close[0]]}'?")


def parse_common(
    options: Mapping[str, str], kafka_settings: Callable[[Mapping[str, str]], dict[str, str]] | None = None,
) -> tuple[dict[str, str], dict[str, str], KafkaConnection]:
    """What every parse of ``options`` (as Spark passes them) starts with: the options with lower-cased keys
    (Spark's dict is case-insensitive), typos refused, the ``kafka.*`` settings (by ``kafka_settings``,
    default :func:`parse_kafka_settings`) and the connection taken from them (see :func:`parse_connection`)."""
    opts = {key.lower(): value for key, value in options.items()}
    reject_typos(opts)
    settings = (kafka_settings or parse_kafka_settings)(opts)
    return opts, settings, parse_connection(settings)
