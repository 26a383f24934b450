"""Range consumers kept between reads in one process.

A task reads its offset ranges one after another, and Spark gives a reused Python worker the next
micro-batch's task: a consumer made for each range would open its connections, fetch metadata and find
its group coordinator every time (a new client for every Kafka partition of every micro-batch). So a range
read that ends cleanly leaves its consumer here, unassigned and emptied, and the next read with the same
configuration takes it. A read that fails closes its consumer instead. Consumers idle for longer than
:data:`MAX_IDLE_S` are closed by a thread that runs while any is idle (an idle client whose brokers went away would
log its reconnections until the process read again), and every idle one at exit.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_IDLE = 4
"""Idle consumers a process keeps, over all configurations."""
MAX_IDLE_S = 60.0

log = logging.getLogger(__name__)


@dataclass
class _Idle:
    key: Hashable
    consumer: Any
    close: Callable[[Any], object]
    since: float


class IdleConsumers:
    """At most ``size`` idle consumers, each taken by one reader at a time."""

    def __init__(self, size: int = MAX_IDLE, max_idle_s: float = MAX_IDLE_S) -> None:
        self._size = size
        self._max_idle_s = max_idle_s
        self._idle: list[_Idle] = []
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None

    def take(self, key: Hashable | None) -> Any | None:
        """An idle consumer made with ``key``'s configuration, now the caller's; None if there is none."""
        if key is None:
            return None
        with self._lock:
            expired = self._expired()
            found = next((idle for idle in reversed(self._idle) if idle.key == key), None)
            if found is not None:
                self._idle.remove(found)
        _close(expired)
        return None if found is None else found.consumer

    def keep(self, key: Hashable, consumer: Any, close: Callable[[Any], object]) -> None:
        """Keep ``consumer`` (released: no partition, nothing queued) for the next read with ``key``."""
        with self._lock:
            self._idle.append(_Idle(key, consumer, close, time.monotonic()))
            dropped, self._idle = self._idle[: -self._size], self._idle[-self._size:]
            reaper = None
            if self._reaper is None:
                reaper = self._reaper = threading.Thread(target=self._reap, name="kafka-eos-idle-consumers", daemon=True)
        _close(dropped)
        if reaper is not None:
            reaper.start()

    def discard(self, key: Hashable | None) -> int:
        """Close every idle consumer made with ``key``'s configuration (one of them was found stale: the others,
        kept from the same reads, are likely to be too); how many."""
        with self._lock:
            dropped = [idle for idle in self._idle if idle.key == key]
            self._idle = [idle for idle in self._idle if idle.key != key]
        _close(dropped)
        return len(dropped)

    def _expired(self) -> list[_Idle]:
        """Remove and return the consumers idle past the limit (the caller holds the lock)."""
        now = time.monotonic()
        expired = [idle for idle in self._idle if now - idle.since > self._max_idle_s]
        self._idle = [idle for idle in self._idle if now - idle.since <= self._max_idle_s]
        return expired

    def _reap(self) -> None:
        while True:
            with self._lock:
                expired = self._expired()
                done = not self._idle
                if done:
                    self._reaper = None  # decided under the lock: a keep() after this starts a new thread
                else:
                    wait = min(idle.since for idle in self._idle) + self._max_idle_s - time.monotonic()
            _close(expired)
            if done:
                return
            time.sleep(max(wait, 0.0) + 0.01)

    def close_all(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        _close(idle)

    def __len__(self) -> int:
        return len(self._idle)


def _close(idle: list[_Idle]) -> None:
    for entry in idle:
        try:
            entry.close(entry.consumer)
        except Exception as err:  # noqa: BLE001 - closing an idle client must not fail a read
            log.debug("Closing an idle consumer failed: %s", err)


def consumer_key(engine: str, config: Mapping[str, Any], *settings: Hashable) -> Hashable | None:
    """What makes two consumers interchangeable: the engine, its librdkafka configuration and ``settings``.
    None (never kept) when the configuration holds a callback other than a logger, such as a token provider."""
    items = []
    for name, value in sorted(config.items()):
        if isinstance(value, logging.Logger):
            value = ("logger", value.name)
        elif value is not None and not isinstance(value, (str, int, float, bool)):
            return None
        items.append((name, value))
    return (engine, tuple(items), settings)


IDLE_CONSUMERS = IdleConsumers()
atexit.register(IDLE_CONSUMERS.close_all)
