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

A ``reset`` or an ``outage`` may be scoped to some clients (``Fault.clients``, a pattern of client ids): then the
connections of other clients go on, and a new connection is refused at its first request (its client id told).

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
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from tests.harness.fault_schedule import (
    API_NAMES,
    BLACKHOLE_REQUEST,
    BLACKHOLE_RESPONSE,
    KINDS,
    LATENCY,
    OUTAGE,
    RESET,
    Fault,
    FaultSchedule,
    FiredFault,
)


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
    client_id: str | None = None
    """Told by its first request."""


def _of(conn: _Connection, clients: str | None) -> bool:
    """Whether a fault scoped to ``clients`` (a client id pattern, None: all) reaches ``conn``."""
    return clients is None or (conn.client_id is not None and re.search(clients, conn.client_id) is not None)


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
        self.reached = 0
        """Connections a reset or an outage reset or refused, or a black hole stalled."""
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
        self._client_outages: list[tuple[float, str]] = []
        """(until, client id pattern): outages of some clients' connections."""
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
            self.connections_served = self.refused = self.reached = 0
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
                if fault.clients is None:
                    self._outage_until = max(self._outage_until, time.monotonic() + fault.duration_s)
                else:
                    self._client_outages.append((time.monotonic() + fault.duration_s, fault.clients))
            self._quiet_in(fault.duration_s)
            live = [c for c in self._connections.values() if _of(c, fault.clients)]
            for conn in live:
                self._close(conn, reset=True)
            self.reached += len(live)
            self._record(fault, f"{fault.duration_s}s: {len(live)} connections reset, new ones refused")

    def _try_reset(self, fault: Fault) -> None:
        """Reset now, or, with no connection open, at the next one (until the schedule's end)."""
        live = sorted(c.ident for c in self._connections.values()
                      if not c.closed and not c.stalled and c.upstream is not None and _of(c, fault.clients))
        if not live:
            assert self._loop is not None
            self._timers.append(self._loop.call_later(0.2, self._retry_reset, fault))
            return
        chosen = live if fault.scope == "all" else [self._rng.choice(live)]
        for ident in chosen:
            self._close(self._connections[ident], reset=True)
        self.reached += len(chosen)
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
            self.reached += 1
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

    def _out(self, client_id: str) -> bool:
        """Whether an outage of some clients' connections holds ``client_id``'s."""
        now = time.monotonic()
        self._client_outages = [(until, pattern) for until, pattern in self._client_outages if until > now]
        return any(re.search(pattern, client_id) for _, pattern in self._client_outages)

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
        self.reached += 1
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
                if conn.client_id is None:
                    conn.client_id = client_id
                    if self._out(client_id):
                        self.refused += 1
                        self.reached += 1
                        self._close(conn, reset=True)
                        return
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


