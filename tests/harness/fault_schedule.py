"""What the fault proxy injects: the kinds of fault, the requests a fault may target, a seeded and bounded
:class:`FaultSchedule` of :class:`Fault` s, and the :class:`FiredFault` record of what each did (see
:mod:`tests.harness.fault_proxy`)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

LATENCY = "latency"
BLACKHOLE_REQUEST = "blackhole_request"
BLACKHOLE_RESPONSE = "blackhole_response"
RESET = "reset"
OUTAGE = "outage"
KINDS = (LATENCY, BLACKHOLE_REQUEST, BLACKHOLE_RESPONSE, RESET, OUTAGE)

API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 15: "DescribeGroups", 16: "ListGroups",
    17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 22: "InitProducerId", 24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit", 32: "DescribeConfigs", 36: "SaslAuthenticate",
    37: "CreatePartitions", 42: "DeleteGroups", 60: "DescribeCluster", 65: "DescribeTransactions",
    66: "ListTransactions",
}
API_KEYS = {name: key for key, name in API_NAMES.items()}

# What a black hole may target: the requests a two-phase commit depends on, first; ``None`` is any request. A target
# is a request's name, or ``name/text``: that request from a client whose client id contains ``text`` (the sink's
# transaction session is "spark-kafka-eos-txn"; its coordinator's producer "<prefix>-coordinator"; a task's
# producer its transactional id).
TXN_SESSION = "spark-kafka-eos-txn"
COMMIT_CRITICAL: tuple[tuple[str, ...], ...] = (
    ("EndTxn",), (f"EndTxn/{TXN_SESSION}",), ("Produce",), ("Produce/coordinator",), ("InitProducerId",),
    ("AddPartitionsToTxn",), ("AddOffsetsToTxn", "TxnOffsetCommit"),
)
OTHER_TARGETS: tuple[tuple[str, ...] | None, ...] = (
    ("DescribeTransactions",), ("FindCoordinator",), ("Fetch",), ("ListOffsets",), ("Metadata",), None,
)


@dataclass(frozen=True)
class Fault:
    """One scheduled fault: armed ``at_s`` seconds after the schedule starts."""

    at_s: float
    kind: str
    duration_s: float = 0.0
    delay_ms: int = 0
    apis: tuple[str, ...] | None = None
    scope: str = "one"
    clients: str | None = None
    """``reset`` and ``outage``: only the connections whose client id this regular expression matches (``re.search``),
    told by their first request; None: every connection."""
    then: tuple[Fault, ...] = ()
    """Faults armed once this one fired, each ``at_s`` seconds after it (for a fault at a point of a protocol)."""

    def describe(self) -> str:
        what = {
            LATENCY: f"+{self.delay_ms}ms for {self.duration_s:.1f}s",
            BLACKHOLE_REQUEST: f"next {'/'.join(self.apis) if self.apis else 'request'}, stall {self.duration_s:.1f}s",
            BLACKHOLE_RESPONSE: f"next {'/'.join(self.apis) if self.apis else 'request'}, stall {self.duration_s:.1f}s",
            RESET: f"{self.scope} connection(s)",
            OUTAGE: f"{self.duration_s:.1f}s",
        }[self.kind]
        return f"t+{self.at_s:.1f}s {self.kind} ({what}{f' of clients /{self.clients}/' if self.clients else ''})"


@dataclass(frozen=True)
class FaultSchedule:
    """A bounded, seeded list of faults within ``window_s`` seconds."""

    seed: int
    window_s: float
    faults: tuple[Fault, ...]

    @classmethod
    def seeded(cls, seed: int, window_s: float, counts: Mapping[str, int], start_s: float = 1.0, arm_by: float = 0.7,
               max_stall_s: float = 5.0, max_outage_s: float = 4.0, long_outage_s: float = 0.0,
               critical: tuple[tuple[str, ...], ...] = COMMIT_CRITICAL,
               others: tuple[tuple[str, ...] | None, ...] = OTHER_TARGETS) -> FaultSchedule:
        """``counts[kind]`` faults of each kind, armed at seeded times between ``start_s`` and ``arm_by`` of the
        window (and over by its end; an armed black hole waits for its request until the window ends). The
        first black hole of each kind targets ``critical[0]`` (EndTxn: the commit point); every other one targets,
        with even odds, one of the requests a commit depends on (``critical``: EndTxn, Produce, InitProducerId,
        AddPartitionsToTxn, the offsets of a transaction) or one of ``others`` (``None``: any request). With
        ``long_outage_s``, the first outage lasts about that long (2 s more or less): long enough that an epoch in
        flight runs out of time and fails."""
        rng = random.Random(seed)
        faults: list[Fault] = []
        for kind in KINDS:
            for index in range(counts.get(kind, 0)):
                if kind == LATENCY:
                    duration, extra = rng.uniform(2.0, 6.0), {"delay_ms": rng.randrange(20, 300)}
                elif kind in (BLACKHOLE_REQUEST, BLACKHOLE_RESPONSE):
                    if index == 0:  # the commit point itself first: EndTxn, or what the first target names
                        apis = critical[0]
                    else:
                        apis = rng.choice(critical) if rng.random() < 0.5 else rng.choice(others)
                    duration, extra = rng.uniform(0.5, max_stall_s), {"apis": apis}
                elif kind == RESET:
                    duration, extra = 0.0, {"scope": rng.choice(("one", "one", "all"))}
                elif index == 0 and long_outage_s:
                    duration, extra = rng.uniform(long_outage_s - 2, long_outage_s + 2), {}
                else:
                    duration, extra = rng.uniform(1.0, max_outage_s), {}
                at = rng.uniform(start_s, max(start_s, min(window_s * arm_by, window_s - duration)))
                faults.append(Fault(round(at, 2), kind, round(duration, 2), **extra))  # type: ignore[arg-type]
        return cls(seed, window_s, tuple(sorted(faults, key=lambda f: f.at_s)))

    def describe(self) -> str:
        return f"seed {self.seed}, window {self.window_s:g}s: " + "; ".join(f.describe() for f in self.faults)


@dataclass
class FiredFault:
    """What one fault did: when (seconds since the schedule started), to which request and client."""

    fault: Fault
    at_s: float
    detail: str
    frames: int = 0
    """latency: frames delayed; blackhole_response: frames of the broker's answer swallowed."""
    answered: bool = False
    """blackhole_response: the broker's response to the request itself arrived (and was swallowed)."""

    def describe(self) -> str:
        if self.fault.kind == LATENCY:
            return f"{self.detail}: {self.frames} frames delayed"
        if self.fault.kind == BLACKHOLE_RESPONSE:
            return f"{self.detail}: {'answered by the broker' if self.answered else 'NOT answered'}, {self.frames} frames swallowed"
        return self.detail
