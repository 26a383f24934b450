"""The bounded map a reused Python worker keeps its clients and facts in."""

from __future__ import annotations

from spark_kafka_eos._internal.bounded_cache import BoundedCache


def test_keeps_the_most_recently_put_and_hands_the_dropped_to_on_drop() -> None:
    dropped: list[str] = []
    cache: BoundedCache[str, str] = BoundedCache(2, on_drop=dropped.append)
    cache.put("a", "A")
    cache.put("b", "B")
    cache.put("a", "A2")  # put again: now the most recent
    cache.put("c", "C")
    assert dropped == ["B"]
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == ("A2", None, "C")
    assert cache.keys() == ["a", "c"] and len(cache) == 2


def test_take_removes_so_that_one_user_at_a_time_has_it() -> None:
    cache: BoundedCache[str, int] = BoundedCache(4)
    cache.put("k", 1)
    assert cache.take("k") == 1
    assert cache.take("k") is None and cache.get("k") is None
