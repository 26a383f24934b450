"""Whether a range read still moves, for ``kafkaConsumer.pollTimeoutMs``.

A read moves when a record is delivered, when ``position()`` moves, or when the fetcher's next
offset moves. The last one matters for a long run of aborted records: librdkafka skips them
without delivering anything and without moving ``position()``, but its statistics report the
partition's ``next_offset`` moving on, as the Java consumer's position does.
"""

from __future__ import annotations

import json


class FetchProgress:
    """The fetcher's next offset for one partition, from librdkafka's statistics callback."""

    def __init__(self, topic: str, partition: int) -> None:
        self._topic, self._partition = topic, str(partition)
        self.next_offset = -1

    def on_statistics(self, statistics: str) -> None:
        try:
            fetch_offset = json.loads(statistics)["topics"][self._topic]["partitions"][self._partition]["next_offset"]
        except (KeyError, TypeError, ValueError):
            return
        self.next_offset = max(self.next_offset, int(fetch_offset))


class StallWatch:
    """Says when neither the position nor the fetch offset moved for ``limit_s`` seconds."""

    def __init__(self, limit_s: float, now: float) -> None:
        self.limit_s = limit_s
        self._position, self._fetch_offset = -1, -1
        self._moved_at = now

    def stalled(self, position: int, fetch_offset: int, now: float) -> bool:
        if position > self._position or fetch_offset > self._fetch_offset:
            self._position = max(position, self._position)
            self._fetch_offset = max(fetch_offset, self._fetch_offset)
            self._moved_at = now
            return False
        return now - self._moved_at > self.limit_s


def statistics_interval_ms(stall_limit_ms: int) -> int:
    """Often enough to see the fetch offset move several times within the stall limit."""
    return max(100, min(1000, stall_limit_ms // 10))
