"""The package's retry policy: which Kafka errors mean "not yet, ask again", how long requests and operations may
take, and how a call is asked again (:func:`retry`) or a condition awaited (:func:`wait_until`) within a deadline,
with a backoff. Errors that are not retriable, and the last error at the deadline, are raised as they came.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

T = TypeVar("T")

REQUEST_TIMEOUT_S = 30.0
"""How long one request to the cluster (metadata, configs, offsets, a delivery) may take, its retries included."""
OPERATION_TIMEOUT_S = 60.0
"""How long a transactional control operation (init, abort, a recovery step with its retries) may take: it may
first wait for the coordinator to finish the id's previous transaction."""
BACKOFF_S = 0.1
"""How long to wait before asking again: a coordinator or leader moves, or a new topic spreads, in tens of ms."""

COORDINATOR_MOVING = frozenset({
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
})
"""Group coordinator answers that mean "not yet": a new cluster, a broker restart, a move."""
LEADER_MOVING = frozenset({KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH, KafkaError.LEADER_NOT_AVAILABLE,
                           KafkaError.NOT_LEADER_FOR_PARTITION})
"""A partition's leader is being elected or has moved, or the broker and the client do not agree on its epoch yet (a
broker back from a crash answers UNKNOWN_LEADER_EPOCH until it has caught up with the new one)."""
UNANSWERED = frozenset({KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT})
"""A request not answered in time."""
UNREACHABLE = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN})
"""No connection to the brokers (a restart, a network blip)."""
JUST_CREATED = frozenset({
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    # A reused admin client whose metadata predates the topic: "Failed to query partition leaders".
    KafkaError._NOENT,
})
"""A topic created a moment ago that the answering broker or client does not know yet."""


class Deadline:
    """A point in time a retried call must end by (``Deadline.never()``: none)."""

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    @classmethod
    def never(cls) -> Deadline:
        return cls(math.inf)

    def passed(self, after_s: float = 0.0) -> bool:
        """Whether the deadline has passed, or will have in ``after_s`` seconds."""
        return time.monotonic() + after_s > self._end

    def left(self, at_least: float = 0.1) -> float:
        """Seconds left, but at least ``at_least`` (a request needs some time even at the deadline)."""
        return max(self._end - time.monotonic(), at_least)


@dataclass(frozen=True)
class Backoff:
    """How long to wait before each new try: ``first_s``, doubled each time up to ``max_s`` (by default
    ``first_s`` every time)."""

    first_s: float = BACKOFF_S
    max_s: float | None = None

    def delays(self) -> Iterator[float]:
        delay = self.first_s
        while True:
            yield delay
            delay = min(delay * 2, self.max_s if self.max_s is not None else self.first_s)


def kafka_codes(codes: Collection[int], or_flagged_retriable: bool = False) -> Callable[[BaseException], bool]:
    """Whether an error is a ``KafkaException`` whose code is in ``codes`` (or, with
    ``or_flagged_retriable``, one that librdkafka itself flags as retriable)."""

    def retriable(exc: BaseException) -> bool:
        if not isinstance(exc, KafkaException):
            return False
        error = exc.args[0]
        return bool(error.code() in codes or (or_flagged_retriable and error.retriable()))

    return retriable


LOOKUP_RETRIABLE = kafka_codes(UNANSWERED | UNREACHABLE | LEADER_MOVING, or_flagged_retriable=True)
"""A metadata or offset look-up worth asking again: unanswered, the cluster unreachable, a leader moving, or an error
librdkafka flags as retriable."""


def any_error(_: BaseException) -> bool:
    """Every error is worth another try (clean-up and bookkeeping whose failure is only logged)."""
    return True


def retry(call: Callable[[Deadline], T], deadline: Deadline, retriable: Callable[[BaseException], bool],
          backoff: Backoff = Backoff(), attempts: int | None = None,
          on_retry: Callable[[Exception, float], None] | None = None) -> T:
    """``call(deadline)`` until it returns. An ``Exception`` it raises is raised as it came unless it is
    ``retriable``, another try is left (``attempts``) and the backoff's next wait ends before the deadline;
    ``on_retry(error, wait)`` is told before each wait."""
    delays = backoff.delays()
    tries = 0
    while True:
        tries += 1
        try:
            return call(deadline)
        except Exception as exc:
            delay = next(delays)
            if not retriable(exc) or (attempts is not None and tries >= attempts) or deadline.passed(delay):
                raise
            if on_retry is not None:
                on_retry(exc, delay)
            time.sleep(delay)


OFFSET_INVALID = -1001
"""What librdkafka's ``list_offsets`` gives, with no error, for a partition whose answer was lost on the way."""


def listed_offset(offset: int) -> int:
    """An offset from ``AdminClient.list_offsets``; one that came back as :data:`OFFSET_INVALID` raises a retriable
    ``_TIMED_OUT`` (taken as an offset it reads as data loss, or as a timestamp with no record after it)."""
    if offset == OFFSET_INVALID:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "the offset look-up came back without an offset (its answer was lost)"))
    return offset


def retry_kafka(call: Callable[[Deadline], T], timeout_s: float, retriable: Collection[int],
                backoff_s: float = BACKOFF_S) -> T:
    """``call(deadline)`` until it returns, asked again after ``backoff_s`` while it raises a
    ``KafkaException`` whose code is in ``retriable`` and ``timeout_s`` has not passed."""
    return retry(call, Deadline(timeout_s), kafka_codes(retriable), Backoff(backoff_s))


def wait_until(condition: Callable[[], bool], deadline: Deadline, backoff: Backoff = Backoff(),
               attempts: int | None = None) -> bool:
    """Ask ``condition`` until it holds, the deadline has passed or it was asked ``attempts`` times, with the
    backoff's waits in between; whether it held."""
    delays = backoff.delays()
    asked = 0
    while True:
        asked += 1
        if condition():
            return True
        if deadline.passed() or (attempts is not None and asked >= attempts):
            return False
        time.sleep(next(delays))
