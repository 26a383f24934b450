"""The package's retry policy: which Kafka errors mean "not yet, ask again", and how a call is asked again
within a deadline. Errors that are not retriable, and the last error at the deadline, are raised as they came.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
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
LEADER_MOVING = frozenset({KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION})
"""A partition's leader is being elected or has moved."""
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
    """A point in time a retried call must end by."""

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def passed(self) -> bool:
        return time.monotonic() > self._end

    def left(self, at_least: float = 0.1) -> float:
        """Seconds left, but at least ``at_least`` (a request needs some time even at the deadline)."""
        return max(self._end - time.monotonic(), at_least)


def retry_kafka(call: Callable[[Deadline], T], timeout_s: float, retriable: Collection[int],
                backoff_s: float = BACKOFF_S) -> T:
    """``call(deadline)`` until it returns, asked again after ``backoff_s`` while it raises a
    ``KafkaException`` whose code is in ``retriable`` and ``timeout_s`` has not passed."""
    deadline = Deadline(timeout_s)
    while True:
        try:
            return call(deadline)
        except KafkaException as exc:
            if exc.args[0].code() not in retriable or deadline.passed():
                raise
            time.sleep(backoff_s)
