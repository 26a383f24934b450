"""What a task's producer reports back, the same on both write paths: delivered records per partition, the
first record (the participant's probe), failures as errors that name their fix, and the producer id and epoch
from librdkafka's statistics."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping

from spark_kafka_eos._internal.client_errors import ClientError, KafkaErrorCode
from spark_kafka_eos._internal.decision_log.records import Position
from spark_kafka_eos._internal.write.commit_message import PartitionCount
from spark_kafka_eos._internal.write.visibility import record_digest
from spark_kafka_eos.errors import KafkaEosWriteError

_PURGED = frozenset({KafkaErrorCode.PURGE_QUEUE, KafkaErrorCode.PURGE_INFLIGHT})
_SIZE_FIX = (
    "raise the topic's max.message.bytes (kafka-configs --alter --entity-type topics --add-config "
    "max.message.bytes=...) and, for records over 1 MB, kafka.message.max.bytes; or write smaller records. "
    "If single records are small, set kafka.batch.size below the topic's max.message.bytes"
)
_FENCED_FIX = "another attempt with the same transactional id took over (a zombie task); Spark retries the task"
_FIXES: Mapping[int, str] = {
    KafkaErrorCode.MSG_SIZE_TOO_LARGE: _SIZE_FIX,
    KafkaErrorCode.RECORD_LIST_TOO_LARGE: _SIZE_FIX,
    KafkaErrorCode.UNKNOWN_TOPIC_OR_PART: "create the topic, or fix the topic option or column",
    KafkaErrorCode.UNKNOWN_TOPIC: "create the topic, or fix the topic option or column",
    KafkaErrorCode.UNKNOWN_PARTITION: "the partition column names a partition the topic does not have; "
    "use values from 0 to partitions - 1, or null to let the partitioner choose",
    KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED: "grant the principal WRITE on the topic",
    KafkaErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "grant the principal WRITE and DESCRIBE on the "
    "TransactionalId resources of the prefix (ACL pattern type PREFIXED)",
    KafkaErrorCode.MSG_TIMED_OUT: "the brokers did not acknowledge in time; check that the topic exists and that the "
    "brokers are reachable and healthy",
    KafkaErrorCode.TIMED_OUT: "the transaction coordinator did not answer in time; check that the brokers are healthy",
    KafkaErrorCode.FENCED: _FENCED_FIX,
    KafkaErrorCode.PRODUCER_FENCED: _FENCED_FIX,
    KafkaErrorCode.INVALID_PRODUCER_EPOCH: _FENCED_FIX,
}
_MAX_REPORTED_FAILURES = 5
_PRODUCER_ID = re.compile(r'"producer_id":\s*(-?\d+)')
_PRODUCER_EPOCH = re.compile(r'"producer_epoch":\s*(-?\d+)')

Failure = tuple[str | None, int | None, ClientError, int]
"""(topic, partition, error, records)."""


class DeliveryTally:
    """Delivered records per (topic, partition), failures per (topic, partition, error), the first record."""

    def __init__(self) -> None:
        # Keyed as a client reports a record's topic and partition; a delivered record has both.
        self.delivered: defaultdict[tuple[str | None, int | None], int] = defaultdict(int)
        self.failures: dict[tuple[str | None, int | None, int], tuple[ClientError, int]] = {}
        self.first: Position | None = None
        self.first_digest: str | None = None

    def set_first(self, position: Position, key: str | bytes | None, value: str | bytes | None) -> None:
        self.first = position
        self.first_digest = record_digest(key, value)

    def add_failure(self, topic: str | None, partition: int | None, err: ClientError, records: int = 1) -> None:
        key = (topic, partition, err.code)
        self.failures[key] = (err, self.failures.get(key, (err, 0))[1] + records)

    def counts(self) -> tuple[PartitionCount, ...]:
        return tuple((topic or "", partition or 0, count) for (topic, partition), count in sorted(self.delivered.items()))

    def error(self, transactional_id: str, stage: str) -> KafkaEosWriteError:
        failures = [(t, p, err, n) for (t, p, _), (err, n) in self.failures.items()]
        # Records purged by the failing transaction are an echo of the failure, not its cause.
        causes = [f for f in failures if f[2].code not in _PURGED] or failures
        return write_error(transactional_id, stage, causes)


def write_error(transactional_id: str, stage: str, failures: list[Failure]) -> KafkaEosWriteError:
    """The task's error for ``failures`` at ``stage``: what failed where, and each failure's fix; its
    ``code`` is the first failure's."""
    described = [
        f"{_where(topic, partition)}{err.name} ({err.description})" + (f" for {count} record(s)" if count else "")
        for topic, partition, err, count in failures[:_MAX_REPORTED_FAILURES]
    ]
    fixes = dict.fromkeys(_FIXES.get(err.code, "see the Kafka error") for _, _, err, _ in failures)
    code = failures[0][2].code if failures else None
    return KafkaEosWriteError(transactional_id, f"{stage}: {'; '.join(described)}.", "; ".join(fixes), code)


def _where(topic: str | None, partition: int | None) -> str:
    if topic is None:
        return ""
    return f"topic {topic} partition {partition}: " if partition is not None and partition >= 0 else f"topic {topic}: "


class EosStats:
    """Statistics callback that keeps the producer id and epoch of librdkafka's statistics (``eos``)."""

    def __init__(self) -> None:
        self.identity: tuple[int, int] | None = None
        """The producer id and epoch, from the first statistics that have them."""

    def on_stats(self, text: str) -> None:
        # Called every statistics interval, also for the ones queued while the producer started; a search of
        # the ``eos`` object costs a fraction of parsing the whole JSON (11 KB with one topic of 32 partitions),
        # which took a quarter of a short task's time (py-spy, make bench-latency at 32 partitions).
        if self.identity is None:
            start = text.rfind('"eos":')
            eos = text[start:text.find("}", start)] if start >= 0 else ""
            producer_id, epoch = _PRODUCER_ID.search(eos), _PRODUCER_EPOCH.search(eos)
            if producer_id is not None and epoch is not None and int(producer_id.group(1)) >= 0:
                self.identity = (int(producer_id.group(1)), int(epoch.group(1)))
