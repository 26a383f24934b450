"""A small thread-safe map that keeps its most recently put entries: what a reused Python worker keeps
between epochs, bounded so that a worker that served many prefixes or clusters does not grow."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """At most ``size`` entries; putting one more drops the one put longest ago (``on_drop`` is called with it)."""

    def __init__(self, size: int, on_drop: Callable[[V], object] | None = None) -> None:
        self._size = size
        self._on_drop = on_drop
        self._entries: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._entries.get(key)

    def take(self, key: K) -> V | None:
        """The entry, removed: one user at a time."""
        with self._lock:
            return self._entries.pop(key, None)

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries.pop(key, None)
            dropped = self._entries.pop(next(iter(self._entries))) if len(self._entries) >= self._size else None
            self._entries[key] = value
        if dropped is not None and self._on_drop is not None:
            self._on_drop(dropped)

    def keys(self) -> list[K]:
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
