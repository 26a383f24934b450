"""librdkafka calls that may never return, bounded by their caller.

librdkafka's transactional calls take a timeout, but some of them wait for the transaction manager's answer with
no limit of their own: ``send_offsets_to_transaction`` waits for a group coordinator request whose timeout is never
checked (librdkafka issues #5456 and #5511), and after a 2 s network outage it did not return in 12 minutes. Such
a call runs through :func:`bounded`, on a thread of its own: past its timeout and a grace it raises
:class:`AbandonedCallError` and the caller must never use that client again. The thread stays blocked inside it; the
client is neither closed nor destroyed (a thread is inside it) and its transaction ends by a fence of its
transactional id or by the broker's transaction timeout, as a crashed process's would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

T = TypeVar("T")

GRACE_S = 5.0
"""How long past its own timeout a call may take before it is given up on (librdkafka ends a timed-out call a little late)."""

_abandoned = 0
_abandoned_lock = threading.Lock()


class AbandonedCallError(KafkaException):
    """A librdkafka call did not return within its bound: its client is lost (a thread is still inside it)."""

    def __init__(self, what: str, bound_s: float) -> None:
        super().__init__(KafkaError(KafkaError._TIMED_OUT, f"{what} did not return within {bound_s:g}s (its own timeout "
                                    f"and {GRACE_S:g}s more): its client was given up on and replaced", retriable=False))
        self.what = what


def bounded(call: Callable[[], T], timeout_s: float, what: str) -> T:
    """``call()``, which should end within ``timeout_s``; :class:`AbandonedCallError` once it has not ended within
    ``timeout_s`` + :data:`GRACE_S`. Its exception, if it raises one, is raised here."""
    outcome: list[tuple[bool, object]] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome.append((False, exc))
        done.set()

    threading.Thread(target=run, name=f"kafka-eos-bounded-{what}", daemon=True).start()
    bound_s = timeout_s + GRACE_S
    if not done.wait(bound_s):
        global _abandoned
        with _abandoned_lock:
            _abandoned += 1
        raise AbandonedCallError(what, bound_s)
    ok, value = outcome[0]
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]


def abandoned_calls() -> int:
    """How many calls this process gave up on (each left a thread and a client behind)."""
    return _abandoned
