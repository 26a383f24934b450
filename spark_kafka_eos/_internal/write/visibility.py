"""Is a participant's output visible to a read_committed reader? The last word before data loss is reported."""

from __future__ import annotations

import hashlib

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import ConfigResource, OffsetSpec

from spark_kafka_eos._internal.cluster import admin_client, point_reader
from spark_kafka_eos._internal.config.reader import Subscription, internal_read_options
from spark_kafka_eos._internal.config.writer import WriterOptions
from spark_kafka_eos._internal.decision_log.records import Position
from spark_kafka_eos._internal.read.partition_reader import read_offset_range
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos._internal.retry import REQUEST_TIMEOUT_S


def record_digest(key: str | bytes | None, value: str | bytes | None) -> str:
    """What a participant's first record was, so that another record at its offset (the topic deleted and
    re-created since) is not taken for it."""
    def raw(part: str | bytes | None) -> bytes:
        return b"\xff" if part is None else part.encode() if isinstance(part, str) else b"\x00" + part
    return hashlib.sha256(raw(key) + b"|" + raw(value)).hexdigest()[:16]


class ProbeRemoved(Exception):
    """The probe record is not in its partition any more, and not because its transaction was aborted."""


class ProbeNotStable(Exception):
    """The probe lies at or above its partition's last stable offset: an open transaction (of any producer) pins
    the LSO below it, so a read_committed reader cannot see it yet, committed or not."""


def committed_record_at(options: WriterOptions, position: Position, digest: str | None = None) -> bool:
    """True if a read_committed reader returns the record at ``position`` (and, given its ``digest``, it is
    that record): the transaction that wrote it committed. False if it is filtered out (aborted), or
    another record. Raises :class:`ProbeRemoved` when retention or compaction may have removed it: then
    nothing can be told from it; :class:`ProbeNotStable` while the partition's LSO is not past it."""
    topic, partition, offset = position
    stable = _last_stable_offset(options, topic, partition)
    if offset >= stable:
        raise ProbeNotStable(f"{topic}-{partition}'s last stable offset is {stable}, at or below the probe at {offset}: "
                             "an open transaction pins it")
    reader_options = internal_read_options(options.connection, Subscription("assign", partitions=((topic, partition),)),
                                           fail_on_data_loss=False)
    for batch in read_offset_range(reader_options, OffsetRange(topic, partition, offset, offset + 1)):
        for row_offset, key, value in zip(*(batch.column(c).to_pylist() for c in ("offset", "key", "value"))):
            if row_offset == offset:
                return digest is None or record_digest(key, value) == digest
    removed = _removed_by_cleanup(options, position)
    if removed:
        raise ProbeRemoved(removed)
    return False


def _last_stable_offset(options: WriterOptions, topic: str, partition: int) -> int:
    request = {KafkaTopicPartition(topic, partition): OffsetSpec.latest()}
    answers = admin_client(options.connection).list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED,
                                                            request_timeout=REQUEST_TIMEOUT_S)
    return int(next(iter(answers.values())).result(REQUEST_TIMEOUT_S).offset)


def _removed_by_cleanup(options: WriterOptions, position: Position) -> str | None:
    """Why a record missing at ``position`` may have been removed by the broker, if it may have."""
    topic, partition, offset = position
    consumer, lock = point_reader(options.connection)
    with lock:
        start, _ = consumer.get_watermark_offsets(KafkaTopicPartition(topic, partition), timeout=REQUEST_TIMEOUT_S, cached=False)
    if offset < start:
        return f"retention removed it ({topic}-{partition} starts at offset {start} now, past the probe at {offset})"
    try:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = admin_client(options.connection).describe_configs([resource], request_timeout=REQUEST_TIMEOUT_S)[resource].result(REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        # Not allowed to describe the topic (or the broker did not answer): compaction cannot be ruled out, and
        # a probe it removed looks just like an aborted one. Reading it as aborted would report committed
        # output as lost, and its advice (re-run) would write it twice.
        error = exc.args[0].str() if exc.args and isinstance(exc.args[0], KafkaError) else str(exc)
        return (f"the cleanup policy of {topic} cannot be read ({error}), so compaction may have removed the probe at "
                f"offset {offset} (with DescribeConfigs on topic {topic}, the sink's principal can tell a "
                "non-compacted topic's aborted participant from a removed one)")
    policy = configs["cleanup.policy"].value if "cleanup.policy" in configs else ""
    if policy and "compact" in policy:
        return f"{topic} is compacted (cleanup.policy={policy}), and compaction may have removed the probe at offset {offset}"
    return None
