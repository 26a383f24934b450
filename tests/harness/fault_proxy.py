"""A seeded TCP fault proxy between Kafka clients and one broker (loopback only), for the network-fault tier.

The proxy forwards bytes between clients and the broker's proxied listener, and injects the faults of a
:class:`FaultSchedule`, each armed at its time after :meth:`FaultProxy.run` started the schedule:

- ``latency``: from the next frame on, for ``duration_s``, every request and every response waits ``delay_ms`` more;
- ``blackhole_request``: the next request (of ``api_keys``, or any) never reaches the broker: it is dropped and
  the connection is stalled both ways for ``duration_s``, then reset;
- ``blackhole_response``: the next request (of ``api_keys``, or any) reaches the broker, which acts on it, but its
  response never reaches the client: the connection is stalled both ways for ``duration_s``, then reset. It
  counts as fired once bytes of the broker's answer were swallowed (the broker did answer);
- ``reset``: one connection (``scope="one"``) or every connection (``"all"``) is reset (RST to the client);
- ``outage``: for ``duration_s``, every connection is reset and every new one refused (accepted, then reset).

A schedule is bounded: a fixed number of faults, each armed within the schedule's window and over by its
end; an armed black hole that meets no matching request by then expires (counted as such, not as fired).
Requests are parsed (Kafka's size-prefixed frames: api key, version, correlation id, client id), so a
fault can target EndTxn, Produce, InitProducerId... and its record names the request and the client.
:attr:`FaultProxy.fired` counts the faults that fired, by kind, so that a test can assert each fired.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

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
        return f"t+{self.at_s:.1f}s {self.kind} ({what})"


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


@dataclass
class _Connection:
    ident: int
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    stalled: bool = False
    swallowing: FiredFault | None = None
    awaited_correlation: int | None = None
    closed: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


def _rst(writer: asyncio.StreamWriter | None) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a broken path looks to the peer."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _client_id(body: bytes) -> str:
    """The client id of a request header (v1+: a nullable int16-length string after the correlation id)."""
    if len(body) < 10:
        return "?"
    (length,) = struct.unpack_from(">h", body, 8)
    return body[10:10 + length].decode("utf-8", "replace") if length >= 0 else ""


async def _frame(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One Kafka frame: its 4-byte size and its body."""
    size = await reader.readexactly(4)
    return size, await reader.readexactly(struct.unpack(">i", size)[0])


class FaultProxy:
    """A TCP proxy on 127.0.0.1 in front of ``upstream_port`` (on 127.0.0.1) that injects a :class:`FaultSchedule`.

    It serves from :meth:`start` (without faults) in a thread of its own; :meth:`run` starts a schedule.
    """

    def __init__(self, upstream_port: int, listen_port: int = 0) -> None:
        self.upstream_port = upstream_port
        self.listen_port = listen_port
        self.fired: Counter[str] = Counter()
        self.expired: Counter[str] = Counter()
        self.log: list[FiredFault] = []
        self.connections_served = 0
        self.refused = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: dict[int, _Connection] = {}
        self._next_id = 0
        self._started_at = time.monotonic()
        self._schedule: FaultSchedule | None = None
        self._armed: list[Fault] = []
        self._latency_armed: list[Fault] = []
        self._latency: list[tuple[float, FiredFault]] = []
        self._outage_until = 0.0
        self._quiet_after = 0.0
        self._pending: set[Fault] = set()
        self._timers: list[asyncio.TimerHandle] = []
        self._rng = random.Random(0)

    # -- life cycle ---------------------------------------------------------------------
    def start(self) -> FaultProxy:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._server = loop.run_until_complete(asyncio.start_server(self._accept, "127.0.0.1", self.listen_port))
            self.listen_port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=serve, name="kafka-fault-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fault proxy did not start")
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            for timer in self._timers:
                timer.cancel()
            if self._server is not None:
                self._server.close()
            for conn in list(self._connections.values()):
                self._close(conn, reset=False)
            # Every task ends here, its outcome taken: a task left pending, or with an exception nobody took, is
            # logged when it is garbage collected, possibly inside another thread's ast.parse, which CPython 3.11
            # then fails ("AST constructor recursion depth mismatch": the traceback's caret anchors parse too).
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    # -- schedules ----------------------------------------------------------------------
    def run(self, schedule: FaultSchedule) -> None:
        """Start ``schedule`` now, replacing any running one, with fresh counters and log."""
        assert self._loop is not None, "start() the proxy first"
        asyncio.run_coroutine_threadsafe(self._run(schedule), self._loop).result(10)

    def done(self) -> bool:
        """Whether every fault of the running schedule fired or expired, and every stall, latency window and
        outage it caused is over."""
        with self._lock:
            return not self._pending and time.monotonic() >= self._quiet_after

    def elapsed_s(self) -> float:
        return time.monotonic() - self._started_at

    def counts(self) -> dict[str, int]:
        """The faults that fired, by kind."""
        with self._lock:
            return dict(self.fired)

    def unfired(self, kinds: Iterable[str] = KINDS) -> list[str]:
        """The kinds among ``kinds`` that never fired."""
        counts = self.counts()
        return [kind for kind in kinds if not counts.get(kind)]

    def report(self) -> str:
        with self._lock:
            lines = [f"fired {dict(sorted(self.fired.items()))}, expired {dict(sorted(self.expired.items()))}; "
                     f"{self.connections_served} connections proxied, {self.refused} refused in outages"]
            lines += [f"  t+{f.at_s:6.2f}s {f.fault.kind}: {f.describe()}" for f in self.log]
        return "\n".join(lines)

    async def _run(self, schedule: FaultSchedule) -> None:
        for timer in self._timers:
            timer.cancel()
        loop = asyncio.get_running_loop()
        self._schedule, self._started_at = schedule, time.monotonic()
        self._rng = random.Random(schedule.seed)
        self._armed, self._latency, self._latency_armed = [], [], []
        with self._lock:
            self._pending = set(schedule.faults)
            self.fired, self.expired, self.log = Counter(), Counter(), []
            self.connections_served = self.refused = 0
        self._timers = [loop.call_later(f.at_s, self._arm, f) for f in schedule.faults]
        self._timers.append(loop.call_later(schedule.window_s, self._expire))

    def _quiet_in(self, seconds: float) -> None:
        with self._lock:
            self._quiet_after = max(self._quiet_after, time.monotonic() + seconds)

    def _record(self, fault: Fault, detail: str, counted: bool = True) -> FiredFault:
        fired = FiredFault(fault, round(self.elapsed_s(), 2), detail)
        with self._lock:
            self.log.append(fired)
            if counted:
                self.fired[fault.kind] += 1
            self._pending.discard(fault)
            self._pending.update(fault.then)
        assert self._loop is not None
        self._timers += [self._loop.call_later(f.at_s, self._arm, f) for f in fault.then]
        return fired

    def _arm(self, fault: Fault) -> None:
        if fault.kind == LATENCY:  # its window opens at the next frame (counted then), and lasts duration_s
            self._latency_armed.append(fault)
        elif fault.kind in (BLACKHOLE_REQUEST, BLACKHOLE_RESPONSE):
            self._armed.append(fault)
        elif fault.kind == RESET:
            self._try_reset(fault)
        elif fault.kind == OUTAGE:
            with self._lock:
                self._outage_until = max(self._outage_until, time.monotonic() + fault.duration_s)
            self._quiet_in(fault.duration_s)
            live = list(self._connections.values())
            for conn in live:
                self._close(conn, reset=True)
            self._record(fault, f"{fault.duration_s}s: {len(live)} connections reset, new ones refused")

    def _try_reset(self, fault: Fault) -> None:
        """Reset now, or, with no connection open, at the next one (until the schedule's end)."""
        live = sorted(c.ident for c in self._connections.values() if not c.closed and not c.stalled and c.upstream is not None)
        if not live:
            assert self._loop is not None
            self._timers.append(self._loop.call_later(0.2, self._retry_reset, fault))
            return
        chosen = live if fault.scope == "all" else [self._rng.choice(live)]
        for ident in chosen:
            self._close(self._connections[ident], reset=True)
        self._record(fault, f"reset {len(chosen)} of {len(live)} open connection(s): {chosen}")

    def _retry_reset(self, fault: Fault) -> None:
        with self._lock:
            pending = fault in self._pending
        if pending:
            self._try_reset(fault)

    def _expire(self) -> None:
        with self._lock:
            for fault in self._pending:
                self.expired[fault.kind] += 1
                self.log.append(FiredFault(fault, round(self.elapsed_s(), 2), f"EXPIRED unfired ({fault.describe()})"))
            self._pending = set()
        self._armed.clear()
        self._latency_armed.clear()

    def _delay_s(self) -> float:
        now = time.monotonic()
        for fault in self._latency_armed:
            record = self._record(fault, f"+{fault.delay_ms}ms for {fault.duration_s}s")
            self._latency.append((now + fault.duration_s, record))
            self._quiet_in(fault.duration_s)
        self._latency_armed.clear()
        self._latency = [entry for entry in self._latency if entry[0] > now]
        if not self._latency:
            return 0.0
        record = max((r for _, r in self._latency), key=lambda r: r.fault.delay_ms)
        record.frames += 1
        return record.fault.delay_ms / 1000

    # -- forwarding ---------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # cancelled by stop(): asyncio would log it
            await self._serve(reader, writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if time.monotonic() < self._outage_until:
            self.refused += 1
            _rst(writer)
            return
        self._next_id += 1
        conn = _Connection(self._next_id, writer)
        self._connections[conn.ident] = conn
        self.connections_served += 1
        try:
            up_reader, conn.upstream = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except Exception:  # noqa: BLE001 - the broker is not there (or the proxy stops): the client is reset
            self._close(conn, reset=True)
            return
        conn.tasks = [asyncio.ensure_future(self._requests(conn, reader)), asyncio.ensure_future(self._responses(conn, up_reader))]
        await asyncio.wait(conn.tasks, return_when=asyncio.FIRST_COMPLETED)
        if not conn.stalled:  # a stalled connection is reset by its timer
            self._close(conn, reset=False)
        await asyncio.gather(*conn.tasks, return_exceptions=True)

    def _close(self, conn: _Connection, reset: bool) -> None:
        if conn.closed:
            return
        conn.closed = True
        self._connections.pop(conn.ident, None)
        if reset:
            _rst(conn.client)
        else:
            conn.client.transport.close()
        if conn.upstream is not None:
            conn.upstream.transport.close()
        for task in conn.tasks:
            if task is not asyncio.current_task():
                task.cancel()

    def _stall(self, conn: _Connection, seconds: float) -> None:
        conn.stalled = True
        assert self._loop is not None
        self._quiet_in(seconds)
        self._timers.append(self._loop.call_later(seconds, self._close, conn, True))

    def _take_blackhole(self, api: str, client_id: str) -> Fault | None:
        def matches(target: str) -> bool:
            name, _, client = target.partition("/")
            return name == api and client in client_id

        for fault in self._armed:
            if fault.apis is None or any(matches(target) for target in fault.apis):
                self._armed.remove(fault)
                return fault
        return None

    async def _requests(self, conn: _Connection, reader: asyncio.StreamReader) -> None:
        assert conn.upstream is not None
        with contextlib.suppress(Exception):  # any error ends the connection (a short frame, a closed transport...)
            while True:
                size, body = await _frame(reader)
                if conn.stalled:
                    continue  # the path is dead: the request goes nowhere
                api_key, version, correlation = struct.unpack_from(">hhi", body)
                api = API_NAMES.get(api_key, f"api{api_key}")
                client_id = _client_id(body)
                what = f"{api} v{version} #{correlation} of {client_id!r} on connection {conn.ident}"
                fault = self._take_blackhole(api, client_id)
                if fault is not None and fault.kind == BLACKHOLE_REQUEST:
                    self._record(fault, f"dropped {what}; stalled {fault.duration_s}s, then reset")
                    self._stall(conn, fault.duration_s)
                    continue
                delay = self._delay_s()
                if delay:
                    await asyncio.sleep(delay)
                conn.upstream.write(size + body)
                await conn.upstream.drain()
                if fault is not None:  # a black-holed response: counted once the broker's answer is swallowed
                    conn.swallowing = self._record(fault, f"forwarded {what}; stalled {fault.duration_s}s, then reset", counted=False)
                    conn.awaited_correlation = correlation
                    self._stall(conn, fault.duration_s)

    async def _responses(self, conn: _Connection, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(Exception):  # any error ends the connection
            while True:
                size, body = await _frame(reader)
                if conn.stalled:
                    swallowed = conn.swallowing
                    if swallowed is not None:
                        swallowed.frames += 1
                        if not swallowed.answered and struct.unpack_from(">i", body)[0] == conn.awaited_correlation:
                            swallowed.answered = True
                            with self._lock:
                                self.fired[BLACKHOLE_RESPONSE] += 1
                    continue
                delay = self._delay_s()
                if delay:
                    await asyncio.sleep(delay)
                conn.client.write(size + body)
                await conn.client.drain()


