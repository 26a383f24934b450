"""The Kafka client errors that the task logic of both engines speaks, whichever library reported them
(confluent-kafka's or the compiled extension's librdkafka): librdkafka's error codes by name, an error as a value,
and the one exception a client call raises. The read rules (:mod:`~spark_kafka_eos._internal.read.partition_reader`) and the
write rules (:mod:`~spark_kafka_eos._internal.write.task_producer`) import no client library; each engine's adapter
translates its library's errors into these."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol


class KafkaErrorCode(IntEnum):
    """The codes of librdkafka's ``rd_kafka_resp_err_t`` that the rules name. Negative codes are librdkafka's own,
    which it names with a leading underscore (``_PARTITION_EOF``); the others are the broker's (Kafka's protocol)."""

    BAD_MSG = -199
    BAD_COMPRESSION = -198
    MSG_TIMED_OUT = -192
    PARTITION_EOF = -191
    UNKNOWN_PARTITION = -190
    UNKNOWN_TOPIC = -188
    TIMED_OUT = -185
    QUEUE_FULL = -184
    NOT_IMPLEMENTED = -170
    UNSUPPORTED_FEATURE = -165
    PURGE_QUEUE = -152
    PURGE_INFLIGHT = -151
    FATAL = -150
    FENCED = -144
    AUTO_OFFSET_RESET = -140
    OFFSET_OUT_OF_RANGE = 1
    UNKNOWN_TOPIC_OR_PART = 3
    MSG_SIZE_TOO_LARGE = 10
    RECORD_LIST_TOO_LARGE = 18
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    INVALID_PRODUCER_EPOCH = 47
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    PRODUCER_FENCED = 90
    UNKNOWN_TOPIC_ID = 100


# librdkafka's descriptions of the local errors the rules make up themselves (rd_kafka_err2str).
_LOCAL_DESCRIPTIONS = {
    KafkaErrorCode.MSG_TIMED_OUT: "Local: Message timed out",
    KafkaErrorCode.QUEUE_FULL: "Local: Queue full",
}


class KafkaErrorLike(Protocol):
    """confluent-kafka's ``KafkaError`` interface, as its adapters hand errors over."""

    def code(self) -> int: ...
    def name(self) -> str: ...
    def str(self) -> str: ...
    def fatal(self) -> bool: ...
    def retriable(self) -> bool: ...
    def txn_requires_abort(self) -> bool: ...


@dataclass(frozen=True)
class ClientError:
    """An error a Kafka client reported: librdkafka's code, name (``MSG_SIZE_TOO_LARGE``, ``_MSG_TIMED_OUT``) and
    description, and librdkafka's flags for a transactional producer's errors."""

    code: int
    name: str
    description: str
    fatal: bool = False
    retriable: bool = False
    txn_requires_abort: bool = False

    @classmethod
    def local(cls, code: KafkaErrorCode) -> ClientError:
        """One of the local errors the rules make up (a queue that stayed full, records never acknowledged)."""
        return cls(int(code), f"_{code.name}", _LOCAL_DESCRIPTIONS[code])

    @classmethod
    def of(cls, error: KafkaErrorLike) -> ClientError:
        """confluent-kafka's ``KafkaError`` as a value of this package."""
        return cls(error.code(), error.name(), error.str(), error.fatal(), error.retriable(), error.txn_requires_abort())


class ClientCallError(Exception):
    """A Kafka client's call failed with :attr:`error` (a producer's init, begin or abort; a consumer's watermarks
    or assignment)."""

    def __init__(self, error: ClientError) -> None:
        super().__init__(f"{error.name}: {error.description}")
        self.error = error

    def __reduce__(self) -> tuple[type[ClientCallError], tuple[ClientError]]:
        return (ClientCallError, (self.error,))


@contextmanager
def raised_as_client_call_error(library_exception: type[Exception]) -> Iterator[None]:
    """A client library's exception whose first argument is its error (confluent-kafka's ``KafkaException``, given
    by its adapters), raised as :class:`ClientCallError`."""
    try:
        yield
    except library_exception as exc:
        raise ClientCallError(ClientError.of(exc.args[0])) from None
