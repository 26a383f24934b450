"""A prefix's index group (``<prefix>.kafka-eos-log-index``): a consumer group that never has members, whose offset on
the log, committed in the same transaction as each record of the prefix, points just past the prefix's last record
(its metadata: the record's digest). Finding that record is then one OffsetFetch and one read at a known offset."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_kafka_eos._internal.cluster import cached_session, group_offset_reader
from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.decision_log.coordinator_id import COORDINATOR_TRANSACTION_TIMEOUT_MS
from spark_kafka_eos._internal.retry import COORDINATOR_MOVING, Deadline, kafka_codes, retry
from spark_kafka_eos._internal.txn.session import TxnSessionError
from spark_kafka_eos.errors import KafkaEosDecisionLogError

INDEX_GROUP_SUFFIX = ".kafka-eos-log-index"
INDEX_NOT_READY = kafka_codes(COORDINATOR_MOVING | {KafkaError._TIMED_OUT}, or_flagged_retriable=True)
INDEX_PROBE_S = 5.0
"""How long an index read waits before asking, once, whether the group may be used at all."""


def index_group(prefix: str) -> str:
    """The consumer group whose offset on the log points just past ``prefix``'s last record."""
    return prefix + INDEX_GROUP_SUFFIX


def index_entry(connection: KafkaConnection, topic: str, prefix: str, settle_timeout_s: float) -> tuple[int, str] | None:
    """(offset of the last record, digest of its value) from the index group, or None. A pending
    index commit (the prefix's coordinator mid-decision, or one whose commit just returned) is
    waited out: the reader is read_committed, so its OffsetFetch asks for stable offsets."""
    group = index_group(prefix)
    diagnosed = False

    def fetch(deadline: Deadline) -> list[KafkaTopicPartition]:
        nonlocal diagnosed
        try:
            return group_offset_reader(connection, group).committed(
                [KafkaTopicPartition(topic, 0)], timeout=min(deadline.left(), INDEX_PROBE_S))
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError._TIMED_OUT and not diagnosed:
                diagnosed = True
                refuse_if_group_unauthorized(connection, group)
            raise

    try:
        [tp] = retry(fetch, Deadline(settle_timeout_s), INDEX_NOT_READY)
    except KafkaException as exc:
        if INDEX_NOT_READY(exc):
            raise index_timeout(prefix, group, settle_timeout_s, exc.args[0]) from None
        raise index_error(group, exc.args[0]) from None
    if tp.error is not None:
        raise index_error(group, tp.error)
    return (tp.offset - 1, tp.metadata or "") if tp.offset > 0 else None


def index_timeout(prefix: str, group: str, waited_s: float, error: KafkaError) -> KafkaEosDecisionLogError:
    return KafkaEosDecisionLogError(
        f"The index group {group} of prefix {prefix} had no stable offset within {waited_s:g}s ({error.str()}): "
        "the prefix's coordinator has a decision open (a driver of the prefix is running, or crashed mid-decision), "
        f"or the group coordinator is unavailable. The broker aborts a crashed decision after "
        f"{COORDINATOR_TRANSACTION_TIMEOUT_MS / 1000:g}s; retry then."
    ).with_code(error.code())


def refuse_if_group_unauthorized(connection: KafkaConnection, group: str) -> None:
    """librdkafka's consumer retries a group it may not use until its timeout, then says only "timed out";
    DescribeGroups says why at once. Over kafka-python: librdkafka's admin OffsetFetch, met by NOT_COORDINATOR or
    a coordinator that went down, can abort the process later (librdkafka issues #5040, #4605). Anything but an
    authorization failure is left to the wait."""
    try:
        cached_session(connection).describe_group(group, timeout_s=INDEX_PROBE_S)
    except TxnSessionError as exc:
        if exc.error == "GROUP_AUTHORIZATION_FAILED":
            raise index_error(group, KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)) from None


def index_error(group: str, error: KafkaError) -> KafkaEosDecisionLogError:
    fix = (f" Fix: allow the sink's principal to Read group {group} (e.g. a prefixed ACL on the transactional id prefix: "
           "kafka-acls --add --allow-principal ... --operation Read --group <prefix> --resource-pattern-type prefixed)."
           if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED else "")
    return KafkaEosDecisionLogError(f"The decision log index group {group} could not be used: {error.str()}.{fix}").with_code(error.code())
