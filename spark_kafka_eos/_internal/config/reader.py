"""Parse and validate the ``kafka_eos`` reader's options once, on the driver.

Option names and forms are those of Spark's built-in Kafka source. Every error here names the option
and the fix, before any task runs. The rules shared with the writer (known names, ``kafka.*``
pass-through, bootstrap) are in :mod:`spark_kafka_eos._internal.config.options`.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.config.options import (
    ASSIGN,
    CONSUMER_GROUP,
    ENDING_OFFSETS,
    ENDING_OFFSETS_BY_TIMESTAMP,
    ENDING_TIMESTAMP,
    FAIL_ON_DATA_LOSS,
    FETCH_OFFSET_NUM_RETRIES,
    FETCH_OFFSET_RETRY_INTERVAL_MS,
    GC_FREEZE,
    GROUP_ID_PREFIX,
    INCLUDE_HEADERS,
    KAFKA_CONSUMER_POLL_TIMEOUT_MS,
    MAX_BYTES_PER_BATCH,
    MAX_OFFSETS_PER_TRIGGER,
    MAX_RECORDS_PER_BATCH,
    MAX_RECORDS_PER_PARTITION,
    MAX_TRIGGER_DELAY,
    MIN_OFFSETS_PER_TRIGGER,
    MIN_PARTITIONS,
    MIN_RECORDS_PER_PARTITION,
    PROGRESS_GROUP,
    READ_ENGINE,
    STARTING_OFFSETS,
    STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY,
    STUCK_PARTITION_WARNING,
    SUBSCRIBE,
    SUBSCRIBE_PATTERN,
    boolean_option,
    canonical_name,
    parse_common,
)
from spark_kafka_eos._internal.native.engine import Engine, engine_option
from spark_kafka_eos._internal.secrets import redact
from spark_kafka_eos.errors import KafkaEosOptionError

T = TypeVar("T")
PartitionKey = tuple[str, int]
"""A Kafka topic-partition as (topic, partition)."""

EARLIEST = -2
LATEST = -1
ReadEngine = Engine
READ_ENGINE_VARIABLE = "KAFKA_EOS_READ_ENGINE"
"""The driver's default for ``readEngine``, where a read does not set it."""

DEFAULT_MAX_RECORDS_PER_BATCH = 50_000
"""Fewer, larger Arrow batches cost Spark less per record; memory stays bounded by maxBytesPerBatch."""
DEFAULT_MIN_RECORDS_PER_PARTITION = 25_000
"""Offset ranges smaller than this are packed together into Spark partitions of up to this many offsets."""
DEFAULT_MAX_BYTES_PER_BATCH = 32 * 1024 * 1024
DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_FETCH_OFFSET_RETRIES = 3
DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS = 1000
"""Spark's default: long enough to outlast a leader election."""
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000
DEFAULT_STUCK_PARTITION_WARNING_MS = 2 * 60_000
FETCH_QUEUE_BACKOFF_MS = 10
FETCH_ERROR_BACKOFF_MS = 100
FETCH_WAIT_MAX_MS = 1
PARTITION_FETCH_BYTES = 8 * 1024 * 1024
_PARTITION_FETCH_BYTES_NAMES = ("max.partition.fetch.bytes", "fetch.message.max.bytes")
INTERNAL_READ_GROUP = "kafka-eos-internal-reader"
"""The group id of the package's own range reads (never joined, nothing committed)."""

_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True)
class Subscription:
    """Which topic-partitions to read: exactly one of subscribe, subscribePattern or assign."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[PartitionKey, ...] = ()

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return f"assign={json.dumps(_group_by_topic(self.partitions))}"


@dataclass(frozen=True)
class OffsetBound:
    """A starting or ending position, before it is resolved against Kafka.

    ``offsets`` maps partitions to offsets (with -2 earliest and -1 latest) for the JSON form,
    ``timestamp`` is one timestamp for all partitions, ``timestamps`` one per partition, ``group``
    the consumer group whose committed offsets to start from (``startingOffsets=group``).
    ``option`` is the option it came from, for error messages.
    """

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps", "group"]
    option: str
    offsets: Mapping[PartitionKey, int] = field(default_factory=dict)
    timestamp: int | None = None
    timestamps: Mapping[PartitionKey, int] = field(default_factory=dict)
    group: str | None = None


@dataclass(frozen=True, repr=False)
class ReaderOptions:
    """Validated options of a ``kafka_eos`` read."""

    connection: KafkaConnection
    subscription: Subscription
    starting: OffsetBound
    ending: OffsetBound | None
    timestamp_strategy: Literal["error", "latest"]
    fail_on_data_loss: bool
    min_partitions: int | None
    max_records_per_partition: int | None
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    include_headers: bool
    max_records_per_batch: int
    max_bytes_per_batch: int
    poll_timeout_ms: int
    fetch_offset_retries: int
    fetch_offset_retry_interval_ms: int
    isolation_level: str
    group_id: str
    kafka_config: Mapping[str, str]
    progress_group: str | None = None
    """Streams: the group that each committed micro-batch's end offsets are committed to (for lag tools)."""
    read_engine: ReadEngine = "auto"
    """Which consumer reads the ranges: the compiled one (``native``), confluent-kafka's (``python``), or the
    compiled one where it is installed and can run the configuration (``auto``)."""
    stuck_partition_warning_ms: int = DEFAULT_STUCK_PARTITION_WARNING_MS
    """Streams: how long a partition's LSO may stand below records of its log before a warning says so."""
    gc_freeze: bool = True
    """Freeze a Spark Python worker's heap at its first kafka_eos call and after new imports (:mod:`spark_kafka_eos._internal.worker_gc`)."""
    min_records_per_partition: int = DEFAULT_MIN_RECORDS_PER_PARTITION
    """Ranges of fewer offsets are packed into shared Spark partitions (0: one Spark partition per range)."""

    @property
    def bootstrap_servers(self) -> str:
        return self.connection.bootstrap_servers

    @property
    def request_timeout_s(self) -> float:
        """Timeout of one metadata or offset request (librdkafka's socket.timeout.ms)."""
        return int(self.kafka_config.get("socket.timeout.ms", "60000")) / 1000.0

    def consumer_config(self) -> dict[str, object]:
        """librdkafka configuration of the executor-side consumer of one offset range."""
        config: dict[str, object] = dict(self.kafka_config)
        config.update(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": self.group_id,
                "isolation.level": self.isolation_level,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "error",
                "enable.partition.eof": True,
            }
        )
        # Named, so that a broker's request log and quotas tell the reader's consumers from other clients.
        config.setdefault("client.id", "spark-kafka-eos-reader")
        # librdkafka prefetches up to 64 MiB per partition by default; keep a task's memory bounded by the Arrow
        # batch rather than by that queue. A queue of one fetch reads as fast as 32 MiB (`make bench-read`).
        queued_bytes = min(self.max_bytes_per_batch, PARTITION_FETCH_BYTES)
        config.setdefault("queued.max.messages.kbytes", str(max(1024, queued_bytes // 1024)))
        # Once that queue holds queued.min.messages, librdkafka waits this long before it fetches again
        # (default 1000 ms): a read that drains the queue in milliseconds would sit idle for most of a second.
        config.setdefault("fetch.queue.backoff.ms", str(FETCH_QUEUE_BACKOFF_MS))
        # A consumer kept for the next range (read/idle_consumers.py) fetches nothing from its broker until the
        # fetch in flight when its last range ended returns: that fetch waits at most this long (default 500 ms)
        # at a log's end, which is where a stream's ranges end. A task of 32 small ranges took 469 ms at 10 ms,
        # 108 ms at 1 ms. Reads end at offsets the log already holds, so a fetch otherwise rarely waits at all.
        config.setdefault("fetch.wait.max.ms", str(FETCH_WAIT_MAX_MS))
        # A partition's fetch returns at most this much (librdkafka's default 1 MiB, about 8,000 records of 100 bytes),
        # and its next fetch is sent only once that one has been served: 2,000,000 records read in 1.13 s at 1 MiB,
        # 0.87 s at 8 MiB (`make bench-read`). Still bounded by fetch.max.bytes, which librdkafka keeps within
        # queued.max.messages.kbytes. Either of librdkafka's two names set by the user wins.
        if not any(name in config for name in _PARTITION_FETCH_BYTES_NAMES):
            config["max.partition.fetch.bytes"] = str(PARTITION_FETCH_BYTES)
        # After a failed fetch (a broker back from a crash answers FENCED_LEADER_EPOCH until the consumer has the
        # new leader epoch, a connection just re-established), librdkafka waits this long (default 500 ms) before it
        # fetches the partition again; Kafka's Java consumer waits retry.backoff.ms, 100 ms.
        config.setdefault("fetch.error.backoff.ms", str(FETCH_ERROR_BACKOFF_MS))
        # Spark's consumer checks every batch's CRC (the Java client's default); librdkafka does not by default,
        # and would hand out a corrupted record as if it were intact.
        config.setdefault("check.crcs", "true")
        return config

    def admin_config(self) -> dict[str, object]:
        """librdkafka configuration of the driver-side admin client (metadata and offsets)."""
        config: dict[str, object] = {
            key: value for key, value in self.kafka_config.items() if not _is_consumer_only(key)
        }
        config["bootstrap.servers"] = self.bootstrap_servers
        # The admin client is a producer to librdkafka, whose metadata requests may create a topic
        # they name on brokers with auto.create.topics.enable; the reader names missing topics.
        config["allow.auto.create.topics"] = False
        return config

    def __repr__(self) -> str:
        return (
            f"ReaderOptions(bootstrap_servers={self.bootstrap_servers!r}, {self.subscription.describe()}, "
            f"starting={self.starting.kind}, ending={self.ending.kind if self.ending else None}, "
            f"isolation_level={self.isolation_level}, kafka_config={redact(self.kafka_config)!r})"
        )


def parse_reader_options(options: Mapping[str, str], streaming: bool) -> ReaderOptions:
    """Validate ``options`` (as Spark passes them) for a batch or streaming read."""
    opts, kafka_config, connection = parse_common(options)
    subscription = _parse_subscription(opts)
    starting = _parse_bound(opts, "starting", default="latest" if streaming else "earliest")
    ending = _parse_bound(opts, "ending", default="latest") if not streaming else None
    if streaming and any(k in opts for k in (ENDING_OFFSETS.lower(), ENDING_TIMESTAMP.lower(), ENDING_OFFSETS_BY_TIMESTAMP.lower())):
        name = next(canonical_name(k) for k in (ENDING_OFFSETS.lower(), ENDING_TIMESTAMP.lower(), ENDING_OFFSETS_BY_TIMESTAMP.lower()) if k in opts)
        raise KafkaEosOptionError(name, "is not valid in a streaming query.", "remove it, or use spark.read for a bounded read.")
    if not streaming:
        _check_batch_bounds(starting, ending)
    isolation = kafka_config.pop("isolation.level", "read_committed")
    if isolation not in _ISOLATION_LEVELS:
        raise KafkaEosOptionError("kafka.isolation.level", f"is {isolation!r}.", "use read_committed (the default) or read_uncommitted.")
    group_id = kafka_config.pop("group.id", "") or f"{opts.get(GROUP_ID_PREFIX.lower(), 'spark-kafka-eos-source')}-{uuid.uuid4()}"
    strategy = opts.get(STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY.lower(), "error").lower()
    if strategy not in ("error", "latest"):
        raise KafkaEosOptionError(
            STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY, f"is {strategy!r}.", "use 'error' (the default) or 'latest'."
        )
    progress_group = opts.get(PROGRESS_GROUP.lower(), "").strip() or None
    if progress_group is not None and not streaming:
        raise KafkaEosOptionError(
            PROGRESS_GROUP, "is for streaming reads: it commits each micro-batch's end offsets.",
            "remove it from this batch read; a batch sink's consumerGroup commits offsets inside its decision.",
        )
    max_offsets = _positive_int(opts, MAX_OFFSETS_PER_TRIGGER)
    min_offsets = _positive_int(opts, MIN_OFFSETS_PER_TRIGGER)
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise KafkaEosOptionError(
            MIN_OFFSETS_PER_TRIGGER, f"({min_offsets}) is larger than maxOffsetsPerTrigger ({max_offsets}).",
            "make minOffsetsPerTrigger <= maxOffsetsPerTrigger.",
        )
    return ReaderOptions(
        connection=connection,
        subscription=subscription,
        starting=starting,
        ending=ending,
        timestamp_strategy="latest" if strategy == "latest" else "error",
        fail_on_data_loss=boolean_option(opts, FAIL_ON_DATA_LOSS),
        min_partitions=_positive_int(opts, MIN_PARTITIONS),
        max_records_per_partition=_positive_int(opts, MAX_RECORDS_PER_PARTITION),
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=_duration_ms(opts, MAX_TRIGGER_DELAY, DEFAULT_MAX_TRIGGER_DELAY_MS),
        stuck_partition_warning_ms=_duration_ms(opts, STUCK_PARTITION_WARNING, DEFAULT_STUCK_PARTITION_WARNING_MS),
        include_headers=boolean_option(opts, INCLUDE_HEADERS),
        max_records_per_batch=_positive_int(opts, MAX_RECORDS_PER_BATCH) or DEFAULT_MAX_RECORDS_PER_BATCH,
        max_bytes_per_batch=_positive_int(opts, MAX_BYTES_PER_BATCH) or DEFAULT_MAX_BYTES_PER_BATCH,
        poll_timeout_ms=_positive_int(opts, KAFKA_CONSUMER_POLL_TIMEOUT_MS) or DEFAULT_POLL_TIMEOUT_MS,
        fetch_offset_retries=_non_negative_int(opts, FETCH_OFFSET_NUM_RETRIES, DEFAULT_FETCH_OFFSET_RETRIES),
        fetch_offset_retry_interval_ms=_non_negative_int(opts, FETCH_OFFSET_RETRY_INTERVAL_MS, DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS),
        isolation_level=isolation,
        group_id=group_id,
        kafka_config=kafka_config,
        progress_group=progress_group,
        read_engine=_read_engine(opts),
        gc_freeze=boolean_option(opts, GC_FREEZE),
        min_records_per_partition=_non_negative_int(opts, MIN_RECORDS_PER_PARTITION, DEFAULT_MIN_RECORDS_PER_PARTITION),
    )


def _read_engine(opts: Mapping[str, str]) -> ReadEngine:
    return engine_option(opts, READ_ENGINE, READ_ENGINE_VARIABLE, "read")



def internal_read_options(
    connection: KafkaConnection, subscription: Subscription, isolation_level: str = "read_committed",
    fail_on_data_loss: bool = True,
) -> ReaderOptions:
    """Options of the package's own reads (the decision log, a participant's output, the CLI's offsets) with an
    already validated ``connection``: nothing here comes from a user, so nothing is parsed again. They read to
    a partition's end, so the broker does not hold their last fetch."""
    return ReaderOptions(
        connection=connection,
        subscription=subscription,
        starting=OffsetBound("earliest", STARTING_OFFSETS),
        ending=OffsetBound("latest", ENDING_OFFSETS),
        timestamp_strategy="error",
        fail_on_data_loss=fail_on_data_loss,
        min_partitions=None,
        max_records_per_partition=None,
        max_offsets_per_trigger=None,
        min_offsets_per_trigger=None,
        max_trigger_delay_ms=DEFAULT_MAX_TRIGGER_DELAY_MS,
        include_headers=False,
        max_records_per_batch=DEFAULT_MAX_RECORDS_PER_BATCH,
        max_bytes_per_batch=DEFAULT_MAX_BYTES_PER_BATCH,
        poll_timeout_ms=DEFAULT_POLL_TIMEOUT_MS,
        fetch_offset_retries=DEFAULT_FETCH_OFFSET_RETRIES,
        fetch_offset_retry_interval_ms=DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS,
        isolation_level=isolation_level,
        group_id=INTERNAL_READ_GROUP,
        kafka_config={**dict(connection.settings), "fetch.wait.max.ms": "10"},
    )


def _parse_subscription(opts: Mapping[str, str]) -> Subscription:
    given = [name for name in (SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN) if name.lower() in opts]
    if len(given) != 1:
        problem = "none of them is set." if not given else f"{' and '.join(given)} are all set."
        raise KafkaEosOptionError(
            "subscribe/subscribePattern/assign", f"exactly one must be set, but {problem}",
            "keep one: subscribe='t1,t2', subscribePattern='t.*' or assign='{\"t1\":[0,1]}'.",
        )
    kind = given[0]
    value = opts[kind.lower()].strip()
    if kind == "subscribe":
        # A set, as in Spark: a topic named twice is read once.
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise KafkaEosOptionError(SUBSCRIBE, "names no topic.", "give a comma-separated list of topics.")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribePattern":
        try:
            re.compile(value)
        except re.error as err:
            raise KafkaEosOptionError(SUBSCRIBE_PATTERN, f"is not a valid regular expression ({err}).", "fix the pattern.") from None
        if not value:
            raise KafkaEosOptionError(SUBSCRIBE_PATTERN, "is empty.", "give a regular expression such as 'orders-.*'.")
        return Subscription("subscribePattern", pattern=value)
    partitions = _parse_partition_json(value, ASSIGN)
    if not partitions:
        raise KafkaEosOptionError(ASSIGN, "names no partition.", "use JSON such as {\"topicA\":[0,1],\"topicB\":[2]}.")
    return Subscription("assign", partitions=tuple(sorted(set(partitions))))


def _parse_partition_json(value: str, option: str) -> list[PartitionKey]:
    example = '{"topicA":[0,1],"topicB":[2,4]}'
    parsed = _load_json(value, option, example)
    if not isinstance(parsed, dict) or not all(
        isinstance(parts, list) and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts)
        for parts in parsed.values()
    ):
        raise KafkaEosOptionError(option, f"must map each topic to a list of partition numbers, got {value!r}.", f"use JSON such as {example}.")
    return [(topic, p) for topic, parts in parsed.items() for p in parts]


def _load_json(value: str, option: str, example: str) -> object:
    try:
        return json.loads(value)
    except json.JSONDecodeError as err:
        raise KafkaEosOptionError(option, f"is not valid JSON ({err.msg} at character {err.pos}): {value!r}.", f"use JSON such as {example}.") from None


def _parse_bound(opts: Mapping[str, str], side: Literal["starting", "ending"], default: str) -> OffsetBound:
    """Spark's precedence: xTimestamp, then xOffsetsByTimestamp, then xOffsets."""
    ts_option, by_ts_option, offsets_option = f"{side}Timestamp", f"{side}OffsetsByTimestamp", f"{side}Offsets"
    if ts_option.lower() in opts:
        return OffsetBound("timestamp", ts_option, timestamp=_timestamp(opts[ts_option.lower()], ts_option))
    if by_ts_option.lower() in opts:
        example = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
        per_partition = _parse_partition_numbers(opts[by_ts_option.lower()], by_ts_option, example)
        for tp, ts in per_partition.items():
            if ts < 0:
                raise KafkaEosOptionError(by_ts_option, f"has a negative timestamp {ts} for {tp[0]}-{tp[1]}.", "give milliseconds since the epoch.")
        return OffsetBound("timestamps", by_ts_option, timestamps=per_partition)
    raw = opts.get(offsets_option.lower(), default).strip()
    if raw.lower() == "group" and side == "starting":
        group = opts.get(CONSUMER_GROUP.lower(), "").strip()
        if not group:
            raise KafkaEosOptionError(
                STARTING_OFFSETS, "is group, but no consumerGroup is set.",
                "name the group with .option('consumerGroup', ...): its committed offsets are the start "
                "(earliest where it has none).",
            )
        return OffsetBound("group", offsets_option, group=group)
    if raw.lower() in ("earliest", "latest"):
        return OffsetBound("earliest" if raw.lower() == "earliest" else "latest", offsets_option)
    example = '{"topicA":{"0":23,"1":-2},"topicB":{"0":-1}}'
    if not raw.startswith("{"):
        also = ", group (with consumerGroup)" if side == "starting" else ""
        raise KafkaEosOptionError(offsets_option, f"is {raw!r}.", f"use earliest, latest{also}, or JSON such as {example} (-2 = earliest, -1 = latest).")
    offsets = _parse_partition_numbers(raw, offsets_option, example)
    for tp, offset in offsets.items():
        if offset < EARLIEST:
            raise KafkaEosOptionError(offsets_option, f"has offset {offset} for {tp[0]}-{tp[1]}.", "use an offset >= 0, -2 (earliest) or -1 (latest).")
    return OffsetBound("offsets", offsets_option, offsets=offsets)


def _parse_partition_numbers(value: str, option: str, example: str) -> dict[PartitionKey, int]:
    parsed = _load_json(value, option, example)
    result: dict[PartitionKey, int] = {}
    if not isinstance(parsed, dict):
        raise KafkaEosOptionError(option, f"must be a JSON object of topics, got {value!r}.", f"use JSON such as {example}.")
    for topic, per_partition in parsed.items():
        if not isinstance(per_partition, dict):
            raise KafkaEosOptionError(option, f"topic {topic!r} must map partitions to numbers, got {per_partition!r}.", f"use JSON such as {example}.")
        for partition, number in per_partition.items():
            if not str(partition).isdigit() or not isinstance(number, int) or isinstance(number, bool):
                raise KafkaEosOptionError(option, f"has {partition!r}: {number!r} for topic {topic!r}.",
                                          f"use partition numbers as keys and whole numbers as values, e.g. {example}.")
            result[(topic, int(partition))] = number
    return result


def _check_batch_bounds(starting: OffsetBound, ending: OffsetBound | None) -> None:
    if starting.kind == "latest" or any(o == LATEST for o in starting.offsets.values()):
        raise KafkaEosOptionError(
            starting.option, "asks a batch read to start at latest, which would read nothing.",
            "start at earliest, at specific offsets, or at a timestamp (latest = -1 is for streams).",
        )
    if ending is not None and (ending.kind == "earliest" or any(o == EARLIEST for o in ending.offsets.values())):
        raise KafkaEosOptionError(
            ending.option, "asks a batch read to end at earliest, which would read nothing.",
            "end at latest (the last stable offset), at specific offsets, or at a timestamp.",
        )


def _timestamp(value: str, option: str) -> int:
    text = value.strip()
    if not text.isdigit():
        raise KafkaEosOptionError(option, f"is {value!r}.", "give milliseconds since the epoch, e.g. 1700000000000.")
    return int(text)


def _positive_int(opts: Mapping[str, str], name: str) -> int | None:
    return _value(opts, name, None, lambda raw: raw.strip().isdigit() and int(raw) > 0, int, "use a whole number greater than 0.")


def _non_negative_int(opts: Mapping[str, str], name: str, default: int) -> int:
    return _value(opts, name, default, lambda raw: raw.strip().isdigit(), int, "use a whole number >= 0.")


def _duration_ms(opts: Mapping[str, str], name: str, default: int) -> int:
    def to_ms(raw: str) -> int:
        match = _DURATION.match(raw)
        assert match is not None
        return int(match.group(1)) * _DURATION_MS[(match.group(2) or "ms").lower()]

    return _value(opts, name, default, lambda raw: _DURATION.match(raw) is not None, to_ms,
                  "use a duration such as 30s, 15m or 500ms.")


def _value(opts: Mapping[str, str], name: str, default: T, valid: Callable[[str], bool], convert: Callable[[str], T],
           fix: str) -> T:
    """Option ``name`` converted, ``default`` when it is not set; an option error naming ``fix`` when it is not ``valid``."""
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if not valid(raw):
        raise KafkaEosOptionError(name, f"is {raw!r}.", fix)
    return convert(raw)


_CONSUMER_ONLY_PREFIXES = (
    "fetch.", "queued.", "auto.", "enable.auto.", "group.", "session.timeout.ms", "heartbeat.",
    "max.poll.interval.ms", "partition.assignment.strategy", "check.crcs", "isolation.level",
    "coordinator.query.interval.ms", "consume.callback.max.messages", "group.protocol",
)


def _is_consumer_only(setting: str) -> bool:
    return setting.startswith(_CONSUMER_ONLY_PREFIXES)


def _group_by_topic(partitions: tuple[PartitionKey, ...]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(topic, []).append(partition)
    return grouped
