"""Counting the requests a broker served, from its request log (``LocalKafka(request_log=True)``).

``BENCH_REQUESTS=1`` makes the benchmarks' embedded broker write that log; a benchmark marks where a system's run
starts and ends in it and prints what the run asked of the broker. Clients are told apart by their software name:
the broker's own (its transaction marker writer and partition-adding client) are counted apart, since they are
the broker's work for the transactions of the others.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

_PREFIX = "Completed request:"
_BROKER_CLIENTS = ("broker-", "AddPartitionsManager-")
"""Client id prefixes of requests a broker sends to itself for others' transactions."""


@dataclass
class RequestTally:
    """Requests by API key name, the clients' and the broker's own apart."""

    clients: Counter[str] = field(default_factory=Counter)
    broker: Counter[str] = field(default_factory=Counter)
    connections: set[str] = field(default_factory=set)

    def add(self, other: RequestTally) -> None:
        self.clients.update(other.clients)
        self.broker.update(other.broker)
        self.connections |= other.connections

    def summary(self, per: int, top: int = 8) -> str:
        """Counts divided by ``per`` (micro-batches): the total, new connections, and the most frequent APIs."""
        def share(n: int) -> str:
            return f"{n / per:.1f}"

        most = ", ".join(f"{name} {share(n)}" for name, n in self.clients.most_common(top))
        return (f"{share(sum(self.clients.values()))} requests ({most}), {share(len(self.connections))} new connections; "
                f"the broker's own {share(sum(self.broker.values()))}")


class RequestLog:
    """A broker's request log, read between two marks."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        """Where the log ends now (bytes)."""
        return self.path.stat().st_size if self.path.exists() else 0

    def tally(self, start: int, end: int) -> RequestTally:
        """The requests completed between two marks, leaving out the brokers' controller traffic."""
        tally = RequestTally()
        with self.path.open("rb") as log:
            log.seek(start)
            text = log.read(end - start).decode("utf-8", "replace")
        for line in text.splitlines():
            if not line.startswith(_PREFIX):
                continue
            request = json.loads(line[len(_PREFIX):])
            if request.get("listener") == "CONTROLLER":
                continue
            header = request["requestHeader"]
            name = header["requestApiKeyName"]
            if str(header.get("clientId", "")).startswith(_BROKER_CLIENTS):
                tally.broker[name] += 1
            else:
                tally.clients[name] += 1
                if name == "API_VERSIONS":
                    tally.connections.add(request["connection"])
        return tally
