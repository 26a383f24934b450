"""Consumers kept between range reads: taken by configuration, bounded in number, closed when idle too long."""

from __future__ import annotations

import time

from spark_kafka_eos._internal.read.idle_consumers import IdleConsumers
from spark_kafka_eos._internal.retry import Backoff, Deadline, wait_until


class _Consumer:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def _close(consumer: _Consumer) -> None:
    consumer.close()


def test_a_consumer_is_taken_by_its_configuration_only() -> None:
    idle = IdleConsumers(size=4, max_idle_s=60)
    kept = _Consumer()
    idle.keep("a", kept, _close)
    assert idle.take("b") is None
    assert idle.take(None) is None
    assert idle.take("a") is kept
    assert idle.take("a") is None
    assert not kept.closed


def test_the_oldest_beyond_the_limit_is_closed() -> None:
    idle = IdleConsumers(size=2, max_idle_s=60)
    consumers = [_Consumer() for _ in range(3)]
    for consumer in consumers:
        idle.keep("a", consumer, _close)
    assert [c.closed for c in consumers] == [True, False, False]
    assert len(idle) == 2


def test_an_idle_consumer_is_closed_without_another_read() -> None:
    """Its process may never read again (a query stopped), while its brokers go away: it must not linger."""
    idle = IdleConsumers(size=4, max_idle_s=0.2)
    first, second = _Consumer(), _Consumer()
    idle.keep("a", first, _close)
    time.sleep(0.1)
    idle.keep("b", second, _close)
    assert wait_until(lambda: first.closed, Deadline(5), Backoff(0.02))
    assert wait_until(lambda: second.closed, Deadline(5), Backoff(0.02))
    assert len(idle) == 0
    # The thread ended with nothing idle; the next kept consumer gets a new one.
    third = _Consumer()
    idle.keep("a", third, _close)
    assert wait_until(lambda: third.closed, Deadline(5), Backoff(0.02))
