"""Parse and validate the ``kafka_eos`` sink options once, on the driver.

Option names follow Spark's Kafka sink (``kafka.bootstrap.servers``, ``topic``, ``kafka.*``) plus the
exactly-once ones: ``transactional.id.prefix``, ``decisionLogTopic`` and ``consumerGroup``. Every error
names the option and the fix, before any task runs. ``kafka.*`` settings pass through to the librdkafka
producer, except those that would break exactly-once (the sink owns the transactional id, idempotence and
acks) and Java-only ones; the rest is checked by librdkafka itself, on the driver, without connecting.

The transactional id prefix names every transaction of the sink, so it must be stable across restarts:
recovery finds a crashed run's open transactions by it. A streaming query without the option derives it
from ``checkpointLocation`` (same checkpoint, same prefix); a batch write has no such anchor and must set it.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal
from urllib.parse import urlsplit

from confluent_kafka import KafkaException, Producer

from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.config.librdkafka import for_librdkafka
from spark_kafka_eos._internal.config.options import (
    ALLOW_NEW_PREFIX,
    CHECKPOINT_LOCATION,
    CONSUMER_GROUP,
    DECISION_LOG_TOPIC,
    GC_FREEZE,
    READER_OWNED_SETTINGS,
    TOPIC,
    TRANSACTIONAL_ID_PREFIX,
    WRITE_ENGINE,
    WRITE_ID,
    boolean_option,
    parse_common,
    parse_kafka_settings,
)
from spark_kafka_eos._internal.native.engine import Engine, engine_option
from spark_kafka_eos._internal.secrets import redact, scrub
from spark_kafka_eos.errors import KafkaEosOptionError

DEFAULT_DECISION_LOG_TOPIC = "_kafka_eos_decisions"
WRITE_ENGINE_VARIABLE = "KAFKA_EOS_WRITE_ENGINE"
"""The driver's default of ``writeEngine``, for every write of a deployment."""
DERIVED_PREFIX_START = "kafka-eos-"
MAX_PREFIX_LENGTH = 200
# librdkafka's statistics carry the producer id and epoch (there is no getter). The task needs them once its
# flush ends; a producer starts in ~20 ms, so at 20 ms the first statistics with them often came after a
# short task's flush, and it waited (9 ms a task, median). librdkafka builds the JSON only this often, and
# the task's callback stops parsing it once it has them.
STATS_INTERVAL_MS = 5

DEADLINE_MARGIN_MS = 10_000
"""A decision must commit at least this long before the earliest participant's transaction times out
(on the broker's clock): phase 2 has to reach every participant in time."""
MIN_TRANSACTION_TIMEOUT_MS = 2 * DEADLINE_MARGIN_MS
"""Below this an epoch has (almost) no time left to write before its decision would be too late."""

_PREFIX = re.compile(r"[A-Za-z0-9._-]+")
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_MAX_TRANSACTION_TIMEOUT_MS = 2_147_483_647

# Producer settings the sink sets itself, and why the user may not.
_OWNED_SETTINGS: Mapping[str, str] = {
    "transactional.id": "the sink derives one transactional id per task from transactional.id.prefix; "
    "use .option('transactional.id.prefix', ...) instead",
    "key.serializer": "kafka_eos has no Java serializers; cast the key column to string or binary",
    "value.serializer": "kafka_eos has no Java serializers; cast the value column to string or binary",
    "statistics.interval.ms": "the sink sets it to read the producer id and epoch from librdkafka's statistics; remove it",
}
# Settings that only affect how librdkafka reaches the brokers; they may name files that exist only on the
# executors (e.g. shipped with --files) or run kinit, so the driver-side check leaves them out.
_NOT_CHECKED_ON_DRIVER = ("ssl.", "sasl.", "security.", "plugin.")


PrefixSource = Literal["option", "checkpointLocation"]
"""Where a write's transactional.id.prefix came from."""


@dataclass(frozen=True, repr=False)
class WriterOptions:
    """Validated options of a ``kafka_eos`` write (streaming or batch)."""

    connection: KafkaConnection
    topic: str | None
    prefix: str
    prefix_source: PrefixSource
    decision_log_topic: str
    consumer_group: str | None
    transaction_timeout_ms: int | None
    kafka_config: Mapping[str, str]
    write_id: str | None = None
    allow_new_prefix: bool = False
    """A query past micro-batch 0 may make its first decision on a prefix that has no record of it."""
    checkpoint_location: str | None = None
    write_engine: Engine = "auto"
    """Which producer writes a task's records: the compiled one (``native``), confluent-kafka's (``python``),
    or the compiled one where it is installed and can run the configuration (``auto``)."""
    gc_freeze: bool = True
    """Freeze a Spark Python worker's heap at its first kafka_eos call and after new imports (:mod:`spark_kafka_eos._internal.worker_gc`)."""

    @property
    def bootstrap_servers(self) -> str:
        return self.connection.bootstrap_servers

    def producer_config(self, transactional_id: str, transaction_timeout_ms: int) -> dict[str, object]:
        """librdkafka configuration of one task's transactional producer."""
        config: dict[str, object] = {
            # Spark's Kafka sink uses the Java client's partitioner (murmur2 of the key); librdkafka's own
            # default (CRC32) would send the same keys to other partitions than format("kafka") did.
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            # librdkafka queues up to 1 GiB by default; keep a task's memory near its Arrow batch.
            "queue.buffering.max.kbytes": 65536,
            "client.id": transactional_id,
        }
        config.update(self.kafka_config)
        config.update(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "transactional.id": transactional_id,
                "transaction.timeout.ms": transaction_timeout_ms,
                "enable.idempotence": True,
                "acks": "all",
                "statistics.interval.ms": STATS_INTERVAL_MS,
            }
        )
        return config

    def __repr__(self) -> str:
        return (
            f"WriterOptions(bootstrap_servers={self.bootstrap_servers!r}, topic={self.topic!r}, "
            f"prefix={self.prefix!r} (from {self.prefix_source}), decision_log_topic={self.decision_log_topic!r}, "
            f"consumer_group={self.consumer_group!r}, transaction_timeout_ms={self.transaction_timeout_ms}, "
            f"write_id={self.write_id!r}, allow_new_prefix={self.allow_new_prefix}, write_engine={self.write_engine!r}, "
            f"gc_freeze={self.gc_freeze}, "
            f"kafka_config={redact(self.kafka_config)!r})"
        )


def parse_writer_options(options: Mapping[str, str], streaming: bool) -> WriterOptions:
    """Validate ``options`` (as Spark passes them) for a streaming (``writeStream``) or batch (``write``) sink."""
    opts, kafka_config, connection = parse_common(options, _producer_settings)
    connection.check_session_settings()
    timeout = kafka_config.pop("transaction.timeout.ms", None)
    prefix, prefix_source = _prefix(opts, streaming)
    parsed = WriterOptions(
        connection=connection,
        topic=_topic_name(opts, TOPIC),
        prefix=prefix,
        prefix_source=prefix_source,
        decision_log_topic=_topic_name(opts, DECISION_LOG_TOPIC) or DEFAULT_DECISION_LOG_TOPIC,
        consumer_group=_consumer_group(opts),
        transaction_timeout_ms=None if timeout is None else _transaction_timeout(timeout),
        kafka_config=kafka_config,
        write_id=_write_id(opts, streaming),
        allow_new_prefix=boolean_option(opts, ALLOW_NEW_PREFIX),
        checkpoint_location=(opts.get(CHECKPOINT_LOCATION.lower()) or "").strip() or None,
        write_engine=engine_option(opts, WRITE_ENGINE, WRITE_ENGINE_VARIABLE, "write"),
        gc_freeze=boolean_option(opts, GC_FREEZE),
    )
    _check_with_librdkafka(parsed)
    return parsed


def derived_prefix(checkpoint_location: str) -> str:
    """The prefix of a streaming query without ``transactional.id.prefix``: a digest of its checkpoint,
    the same however the checkpoint's path is spelt."""
    return _prefix_of(_normalise_location(checkpoint_location))


def _prefix_of(location: str) -> str:
    return DERIVED_PREFIX_START + hashlib.sha256(location.encode("utf-8")).hexdigest()[:16]


def _producer_settings(opts: Mapping[str, str]) -> dict[str, str]:
    for key in opts:
        if not key.startswith("kafka."):
            continue
        setting = key[len("kafka."):]
        if setting in _OWNED_SETTINGS:
            raise KafkaEosOptionError(key, "is not supported by the kafka_eos sink.", _OWNED_SETTINGS[setting] + ".")
        if setting in READER_OWNED_SETTINGS:
            raise KafkaEosOptionError(key, "is a consumer setting; the kafka_eos sink only produces.", "remove it from the writer's options.")
    settings = parse_kafka_settings(opts)
    idempotence = settings.pop("enable.idempotence", "true").strip().lower()
    if idempotence != "true":
        raise KafkaEosOptionError(
            "kafka.enable.idempotence", f"is {idempotence!r}; transactions need the idempotent producer.",
            "remove it (the sink always enables idempotence).",
        )
    for name in ("acks", "request.required.acks"):
        acks = settings.pop(name, "all").strip().lower()
        if acks not in ("all", "-1"):
            raise KafkaEosOptionError(
                f"kafka.{name}", f"is {acks!r}; exactly-once needs every in-sync replica to acknowledge.",
                "remove it (the sink always uses acks=all).",
            )
    return settings


def _prefix(opts: Mapping[str, str], streaming: bool) -> tuple[str, PrefixSource]:
    given = opts.get(TRANSACTIONAL_ID_PREFIX)
    if given is not None:
        prefix = given.strip()
        if not _PREFIX.fullmatch(prefix) or len(prefix) > MAX_PREFIX_LENGTH:
            raise KafkaEosOptionError(
                TRANSACTIONAL_ID_PREFIX, f"is {given!r}.",
                f"use 1 to {MAX_PREFIX_LENGTH} characters among letters, digits, '.', '_' and '-'.",
            )
        return prefix, "option"
    checkpoint = (opts.get(CHECKPOINT_LOCATION.lower()) or "").strip()
    if streaming and checkpoint:
        return derived_prefix(checkpoint), "checkpointLocation"
    if streaming:
        raise KafkaEosOptionError(
            "transactional.id.prefix/checkpointLocation", "neither is set, so the sink has no stable name for its transactions.",
            "add .option('transactional.id.prefix', 'orders-etl') (keep it across restarts), "
            "or give the query's .option('checkpointLocation', ...) to derive it from.",
        )
    raise KafkaEosOptionError(
        TRANSACTIONAL_ID_PREFIX, "is missing; a batch write needs it so that a failed run's open transactions "
        "are found and aborted by the next run.",
        "add .option('transactional.id.prefix', 'orders-backfill') and keep it the same when re-running the job.",
    )


def _write_id(opts: Mapping[str, str], streaming: bool) -> str | None:
    raw = opts.get(WRITE_ID.lower())
    if raw is None:
        return None
    if streaming:
        raise KafkaEosOptionError(
            WRITE_ID, "is for batch writes (df.write); a stream's epochs are named by its query and micro-batch.",
            "remove it: the checkpoint makes a restarted query's replays recognisable.",
        )
    write_id = raw.strip()
    if not _PREFIX.fullmatch(write_id) or len(write_id) > MAX_PREFIX_LENGTH:
        raise KafkaEosOptionError(
            WRITE_ID, f"is {raw!r}.",
            f"use 1 to {MAX_PREFIX_LENGTH} characters among letters, digits, '.', '_' and '-' (e.g. the job's run date).",
        )
    return write_id


_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "abfss": "abfs", "wasbs": "wasb", "dbfs": "", "file": ""}
"""Schemes that name the same store: Hadoop's s3a/s3n and s3, the TLS and plain Azure schemes, and
Databricks' dbfs:, the default file system of a Databricks cluster (``dbfs:/Volumes/x`` is ``/Volumes/x``)."""


def _normalise_location(location: str) -> str:
    """One spelling per checkpoint directory: 'file:///c/', 'file:/c', '/c//', a symbolic link to /c, and
    'c' in / are all '/c'; 's3a://b/c' is 's3://b/c'. A relative path is made absolute first, as Spark
    resolves it (against the driver's directory)."""
    parts = urlsplit(location.strip())
    scheme = parts.scheme.lower()
    scheme = _SCHEME_ALIASES.get(scheme, scheme)
    if scheme == "" and parts.path.startswith("/dbfs/"):  # Databricks' local mount of dbfs:/
        parts = parts._replace(path=parts.path[len("/dbfs"):])
    if not parts.scheme and not posixpath.isabs(parts.path):
        parts = urlsplit(os.path.abspath(parts.path))
    path = posixpath.normpath(parts.path) if parts.path else "/"
    if path.startswith("//"):  # normpath keeps a leading '//' (POSIX); a checkpoint path never means it
        path = "/" + path.lstrip("/")
    if scheme == "" and not parts.netloc:
        return os.path.realpath(path)  # the driver's local file system: the same directory by any link
    if scheme in ("", "file") and not parts.netloc:
        return path
    return f"{scheme}://{parts.netloc.lower()}{path}"


def _topic_name(opts: Mapping[str, str], option: str) -> str | None:
    raw = opts.get(option.lower())
    if raw is None:
        return None
    name = raw.strip()
    if not _TOPIC.fullmatch(name) or name in (".", ".."):
        raise KafkaEosOptionError(option, f"is {raw!r}, not a valid Kafka topic name.", "use 1 to 249 letters, digits, '.', '_' or '-'.")
    return name


def _consumer_group(opts: Mapping[str, str]) -> str | None:
    raw = opts.get(CONSUMER_GROUP.lower())
    if raw is None:
        return None
    if not raw.strip():
        raise KafkaEosOptionError(CONSUMER_GROUP, "is empty.", "name the consumer group whose offsets the sink commits, or remove the option.")
    return raw.strip()


def _transaction_timeout(raw: str) -> int:
    text = raw.strip()
    if not text.isdigit() or not 0 < int(text) <= _MAX_TRANSACTION_TIMEOUT_MS:
        raise KafkaEosOptionError(
            "kafka.transaction.timeout.ms", f"is {raw!r}.",
            "use a whole number of milliseconds greater than 0, at most the broker's transaction.max.timeout.ms "
            "(or remove it: the sink then uses the broker's maximum).",
        )
    if int(text) < MIN_TRANSACTION_TIMEOUT_MS:
        raise KafkaEosOptionError(
            "kafka.transaction.timeout.ms", f"is {text} ms: every epoch must be decided {DEADLINE_MARGIN_MS // 1000} s "
            "before its transactions time out, so nearly every epoch would be aborted.",
            f"use at least {MIN_TRANSACTION_TIMEOUT_MS} (or remove it: the sink then uses the broker's maximum).",
        )
    return int(text)


def _check_with_librdkafka(options: WriterOptions) -> None:
    """Let librdkafka refuse unknown or invalid producer settings now, rather than in every task."""
    problem = _librdkafka_refusal(options)
    if problem is None:
        return
    # librdkafka names the property it refused, but not always as the user spelt it (aliases): try them one by one.
    culprit = next((key for key, value in options.kafka_config.items()
                    if _librdkafka_refusal(replace(options, kafka_config={key: value}))), None)
    raise KafkaEosOptionError(
        f"kafka.{culprit}" if culprit else "kafka.*", f"is refused by librdkafka: {scrub(problem, options.kafka_config)}",
        "fix or remove the setting (librdkafka's CONFIGURATION.md lists the producer settings).",
    )


_REFUSALS: dict[tuple[tuple[str, object], ...], str | None] = {}
"""librdkafka's verdict per configuration, for this process: the driver checks the same options at
every micro-batch (a librdkafka instance with its threads, ~3 ms each time)."""


def _librdkafka_refusal(options: WriterOptions) -> str | None:
    """librdkafka's error for the producer configuration, or None. A producer without bootstrap servers
    never connects; it is created and dropped at once."""
    # Below the int32 maximum: librdkafka checks socket.timeout.ms <= transaction.timeout.ms + 100.
    timeout_ms = options.transaction_timeout_ms or _MAX_TRANSACTION_TIMEOUT_MS - 1000
    config = options.producer_config("kafka-eos-config-check", timeout_ms)
    config = {key: value for key, value in config.items() if not key.startswith(_NOT_CHECKED_ON_DRIVER)}
    del config["bootstrap.servers"]
    config["log_level"] = 0
    key = tuple(sorted(config.items()))
    if key not in _REFUSALS:
        _REFUSALS[key] = _refusal_of(config)
    return _REFUSALS[key]


def _refusal_of(config: dict[str, object]) -> str | None:
    try:
        Producer(for_librdkafka(config))
    except KafkaException as err:
        return str(err.args[0].str())
    except (TypeError, ValueError) as err:
        return str(err)
    return None
