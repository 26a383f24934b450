"""The rules every set of ``kafka_eos`` options shares, reader's and writer's alike.

Spark hands options over as a case-insensitive dict of strings. Here: the names of every known option
(so that a typo is refused with "did you mean ..."), the ``kafka.*`` pass-through to librdkafka, which
refuses settings that only exist in the Java client (naming the librdkafka equivalent) and settings that
would break the guarantees, and the required ``kafka.bootstrap.servers``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.config.librdkafka import JAVA_ONLY_SETTINGS
from spark_kafka_eos.errors import KafkaEosOptionError

Side = Literal["read", "write", "both", "spark"]
"""Who reads an option: the source, the sink, both, or Spark itself (known here so that it is never taken for a
typo of ours)."""


@dataclass(frozen=True)
class Option:
    """One option of ``kafka_eos``, declared once (:func:`_declare`): the name as documented (camelCase; Spark
    lower-cases the keys it passes), who reads it, its default as a user would write it ("" for none) and its
    meaning in one line. The typo check, ``help(KafkaEosDataSource)`` and the docs' option tables come from it."""

    name: str
    side: Side
    default: str
    doc: str


OPTIONS: dict[str, Option] = {}
"""Every option, by name, in the order declared."""


def _declare(name: str, side: Side, default: str, doc: str) -> str:
    OPTIONS[name] = Option(name, side, default, doc)
    return name


SUBSCRIBE = _declare("subscribe", "read", "", "the topics to read, comma-separated (exactly one of subscribe, subscribePattern, assign)")
SUBSCRIBE_PATTERN = _declare("subscribePattern", "read", "", "a regular expression of the topics to read")
ASSIGN = _declare("assign", "read", "", 'the topic-partitions to read, as JSON: {"t":[0,1]}')
STARTING_OFFSETS = _declare("startingOffsets", "read", "earliest (batch), latest (stream)",
                            'where to start: earliest, latest, JSON per partition ({"t":{"0":23}}), or group (with consumerGroup)')
ENDING_OFFSETS = _declare("endingOffsets", "read", "latest", "batch reads only: where to stop: latest (the last stable offset) or JSON per partition")
STARTING_TIMESTAMP = _declare("startingTimestamp", "read", "", "start at this timestamp (ms) in every partition")
ENDING_TIMESTAMP = _declare("endingTimestamp", "read", "", "batch reads only: stop at this timestamp (ms) in every partition")
STARTING_OFFSETS_BY_TIMESTAMP = _declare("startingOffsetsByTimestamp", "read", "", 'start at a timestamp (ms) per partition: {"t":{"0":1700000000000}}')
ENDING_OFFSETS_BY_TIMESTAMP = _declare("endingOffsetsByTimestamp", "read", "", "batch reads only: stop at a timestamp (ms) per partition")
STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY = _declare("startingOffsetsByTimestampStrategy", "read", "error",
                                                  "error or latest, when no record is at or after a starting timestamp")
FAIL_ON_DATA_LOSS = _declare("failOnDataLoss", "read", "true", "fail when records the query needs are gone; false: a warning, then read on")
MIN_PARTITIONS = _declare("minPartitions", "read", "", "at least this many Spark partitions: large ranges are cut")
MAX_RECORDS_PER_PARTITION = _declare("maxRecordsPerPartition", "read", "", "cut ranges longer than this many offsets")
MIN_RECORDS_PER_PARTITION = _declare("minRecordsPerPartition", "read", "25000",
                                     "ranges shorter than this share Spark partitions of up to this many offsets; 0: one Spark partition per range")
MAX_OFFSETS_PER_TRIGGER = _declare("maxOffsetsPerTrigger", "read", "", "streams: at most this many offsets a micro-batch")
MIN_OFFSETS_PER_TRIGGER = _declare("minOffsetsPerTrigger", "read", "", "streams: wait for this many offsets, up to maxTriggerDelay")
MAX_TRIGGER_DELAY = _declare("maxTriggerDelay", "read", "15m", "streams: the longest wait for minOffsetsPerTrigger")
STUCK_PARTITION_WARNING = _declare("stuckPartitionWarning", "read", "2m",
                                   "streams: warn when a partition's last stable offset stands this long below records (an open transaction); 0: never")
INCLUDE_HEADERS = _declare("includeHeaders", "read", "false", "add the headers column")
GROUP_ID_PREFIX = _declare("groupIdPrefix", "read", "spark-kafka-eos-source", "the prefix of the consumer group id used for fetching (never joined)")
KAFKA_CONSUMER_POLL_TIMEOUT_MS = _declare("kafkaConsumer.pollTimeoutMs", "read", "120000", "a range read that makes no progress this long fails")
FETCH_OFFSET_NUM_RETRIES = _declare("fetchOffset.numRetries", "read", "3", "retries of the driver's offset look-ups")
FETCH_OFFSET_RETRY_INTERVAL_MS = _declare("fetchOffset.retryIntervalMs", "read", "1000", "milliseconds between those retries")
MAX_RECORDS_PER_BATCH = _declare("maxRecordsPerBatch", "read", "50000", "records of one Arrow batch of a read task")
MAX_BYTES_PER_BATCH = _declare("maxBytesPerBatch", "read", "33554432", "bytes of keys, values and headers of one Arrow batch of a read task")
READ_ENGINE = _declare("readEngine", "read", "auto", "auto, native (the compiled extension) or python: which consumer reads the ranges")
PROGRESS_GROUP = _declare("progressGroup", "read", "", "streams: commit each finished micro-batch's end offsets to this consumer group")
CONSUMER_GROUP = _declare("consumerGroup", "both", "",
                          "the sink commits the consumed source offsets to this group inside its decision; the source reads from it with startingOffsets=group")
GC_FREEZE = _declare("gcFreeze", "both", "true", "freeze a Spark Python worker's heap at its first kafka_eos call, and again after new imports")
TOPIC = _declare("topic", "write", "", "the topic of rows without a topic column (the option wins over the column)")
TRANSACTIONAL_ID_PREFIX = _declare("transactional.id.prefix", "write", "streams: derived from checkpointLocation",
                                   "the stable name of the sink's transactions; one query or job per prefix")
DECISION_LOG_TOPIC = _declare("decisionLogTopic", "write", "_kafka_eos_decisions", "the decision log topic")
WRITE_ID = _declare("writeId", "write", "a new id per job", "batch writes only: the write's id; a re-run with the same id writes nothing more")
ALLOW_NEW_PREFIX = _declare("allowNewPrefix", "write", "false", "streams: let a query past micro-batch 0 start on a prefix that has no record of it")
WRITE_ENGINE = _declare("writeEngine", "write", "auto", "auto, native (the compiled extension) or python: which producer writes a task's records")
CHECKPOINT_LOCATION = _declare("checkpointLocation", "spark", "", "Spark's: a stream's checkpoint (the sink derives its default prefix from it)")
PATH = _declare("path", "spark", "", "Spark's: the argument of load() and save(), unused by kafka_eos")

READER_OPTIONS = tuple(name for name, option in OPTIONS.items() if option.side in ("read", "both"))
# Options of the sink and of Spark itself: known, so never reported as typos of a source option.
WRITER_AND_SPARK_OPTIONS = tuple(name for name, option in OPTIONS.items() if option.side in ("write", "spark"))
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


def boolean_option(opts: Mapping[str, str], name: str) -> bool:
    """Option ``name`` (true or false, in any case; looked up lower-cased in ``opts``), else its declared default."""
    raw = opts.get(name.lower(), OPTIONS[name].default).strip().lower()
    if raw not in ("true", "false"):
        raise KafkaEosOptionError(name, f"is {opts.get(name.lower())!r}.", "use true or false.")
    return raw == "true"


def options_help() -> str:
    """Every option with its default and meaning, for ``help(KafkaEosDataSource)``."""
    titles = {"read": "Reading", "write": "Writing", "both": "Reading and writing", "spark": "Spark's own"}
    lines = []
    for side, title in titles.items():
        lines += ["", f"    {title}:", ""]
        for option in (o for o in OPTIONS.values() if o.side == side):
            default = f" (default: {option.default})" if option.default else ""
            lines.append(f"    * ``{option.name}``{default}: {option.doc}.")
    return "\n".join(lines) + "\n"


def options_table(*sides: Side) -> str:
    """A Markdown table of the options of ``sides``: name, default, meaning (for the docs)."""
    rows = ["| option | default | meaning |", "|---|---|---|"]
    rows += [f"| `{o.name}` | {o.default} | {o.doc} |" for o in OPTIONS.values() if o.side in sides]
    return "\n".join(rows) + "\n"
