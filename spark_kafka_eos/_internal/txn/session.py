"""TransactionSession: every transaction-coordinator RPC in one place.

Participants (confluent-kafka producers) begin a transaction, produce, flush and go away without closing,
leaving it open on its coordinator. This session finishes it by identity alone -- transactional id,
producer id, epoch -- like the TransactionSession proposal (KAFKA-20381): no producer, just the RPCs
FindCoordinator, InitProducerId, EndTxn, AddOffsetsToTxn, TxnOffsetCommit, DescribeTransactions and
ListTransactions, built from kafka-python's protocol classes and sent over one connection pool.

Protocol versions are capped to what librdkafka (transaction protocol v1, no KIP-890) speaks, because
every transaction we finish was started by librdkafka:

* EndTxn <= 3 and AddOffsetsToTxn <= 3: v4 adds TRANSACTION_ABORTABLE (KIP-890 part 1) and EndTxn v5
  bumps the epoch on every commit (KIP-890 part 2), which a librdkafka participant would not follow.
* InitProducerId <= 4: v5 adds TRANSACTION_ABORTABLE; v6 (KIP-939 Enable2Pc / KeepPreparedTxn) is used
  only when ``enable_2pc`` is asked for *and* the broker advertises v6 (Kafka 4.3 does not).
* TxnOffsetCommit <= 3: v3 carries KIP-447 generation / member fields; we send their "no group
  membership" defaults (generation -1, member ""), which the group coordinator accepts like a
  simple-group commit. v4 adds TRANSACTION_ABORTABLE, v5 is transaction version 2 only.
* The read-only RPCs (FindCoordinator, DescribeTransactions, ListTransactions) are not capped.

Errors are classified: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
CONCURRENT_TRANSACTIONS, REQUEST_TIMED_OUT and network failures are retried with bounded exponential
backoff (re-discovering the coordinator when the error says it moved); fencing errors raise
:class:`TxnFencedError`, INVALID_TXN_STATE raises :class:`TxnInvalidStateError`, the rest
:class:`TxnFatalError`. A commit retried after it already happened succeeds: the coordinator answers
EndTxn(commit) on a CompleteCommit transaction with the same producer id and epoch with NONE (KIP-98's
rule for coordinator fail-over), so roll-forward may simply commit again; likewise abort after abort.
Abort after commit and commit after abort are INVALID_TXN_STATE and raise. A transaction the coordinator
aborted on timeout has a bumped epoch, so committing it raises :class:`TxnFencedError` (PRODUCER_FENCED).
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import TracebackType
from typing import Any, TypeVar

import kafka.errors as Errors
from kafka.net import KafkaConnectionManager, NetworkSelector
from kafka.protocol.admin.groups import DescribeGroupsRequest
from kafka.protocol.admin.transactions import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import CoordinatorType, FindCoordinatorRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

from spark_kafka_eos._internal.config.kafka_python import translate
from spark_kafka_eos._internal.retry import OPERATION_TIMEOUT_S, Backoff, Deadline, wait_until
from spark_kafka_eos._internal.secrets import redact
from spark_kafka_eos.errors import KafkaEosError

log = logging.getLogger(__name__)
T = TypeVar("T")

END_TXN_MAX_VERSION = 3
ADD_OFFSETS_TO_TXN_MAX_VERSION = 3
TXN_OFFSET_COMMIT_MAX_VERSION = 3
INIT_PRODUCER_ID_MAX_VERSION = 4
DESCRIBE_GROUPS_MAX_VERSION = 5
INIT_PRODUCER_ID_2PC_VERSION = 6
_MAX_BACKOFF_S = 1.0
# Long enough for a crashed broker to be fenced (broker.session.timeout.ms, 9 s by default) and for the
# brokers taking over its transaction coordinators to load them.
_LIST_SETTLE_S = 30.0


class TxnState(str, Enum):
    """Transaction states as the coordinator names them, plus ``NotFound`` for an unknown id."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    DEAD = "Dead"
    NOT_FOUND = "NotFound"

    def __str__(self) -> str:
        return self.value


def _state(raw: str) -> str:
    """A known state as :class:`TxnState` (still a str), an unknown future one as its raw name."""
    try:
        return TxnState(raw)
    except ValueError:
        return raw


@dataclass(frozen=True)
class PreparedTxnState:
    """The identity of a prepared (flushed, still open) transaction: enough to commit or abort it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int

    def serialize(self) -> str:
        """``"<transactional id>:<producer id>:<epoch>"``; the id may itself contain ':'."""
        return f"{self.transactional_id}:{self.producer_id}:{self.producer_epoch}"

    @classmethod
    def parse(cls, text: str) -> PreparedTxnState:
        """Inverse of :meth:`serialize`."""
        parts = text.rsplit(":", 2)
        try:
            if len(parts) != 3 or not parts[0]:
                raise ValueError
            return cls(parts[0], int(parts[1]), int(parts[2]))
        except ValueError:
            raise ValueError(f"not a serialized PreparedTxnState (txnid:pid:epoch): {text!r}") from None


@dataclass(frozen=True)
class TxnDescription:
    """DescribeTransactions for one id. An id the coordinator does not know (never used, or expired)
    is described with state ``NotFound`` and producer id / epoch -1, so every asked id has an entry."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    topic_partitions: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def prepared_state(self) -> PreparedTxnState:
        """The identity a commit or abort of this transaction must carry."""
        return PreparedTxnState(self.transactional_id, self.producer_id, self.producer_epoch)


@dataclass(frozen=True)
class TxnListing:
    """One row of ListTransactions."""

    transactional_id: str
    producer_id: int
    state: str


class TxnSessionError(KafkaEosError):
    """A coordinator RPC failed. Carries the transactional id, the request and the Kafka error name."""

    def __init__(self, message: str, transactional_id: str | None = None,
                 request: str | None = None, error: str | None = None) -> None:
        super().__init__(message)
        self.transactional_id = transactional_id
        self.request = request
        self.error = error


class TxnFencedError(TxnSessionError):
    """The producer id / epoch is no longer current: someone re-initialised the id, or the coordinator
    aborted the transaction (timeout) and bumped the epoch."""


class TxnInvalidStateError(TxnSessionError):
    """The transaction is not in a state that allows this request (e.g. abort after commit)."""


class TxnFatalError(TxnSessionError):
    """Any other error (authorization, unsupported version, unknown error...): not retried."""


class TxnTimeoutError(TxnSessionError):
    """The cluster did not answer in time, or a retriable error outlasted the retry budget."""


_TRANSITIONAL = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE})
_IN_FLIGHT_PER_CONNECTION = 64
_RETRIABLE: tuple[type[Exception], ...] = (
    Errors.CoordinatorLoadInProgressError,
    Errors.ConcurrentTransactionsError,
    Errors.RequestTimedOutError,
)
# Errors after which the coordinator is looked up again before the retry.
_REDISCOVER: tuple[type[Exception], ...] = (
    Errors.NotCoordinatorError,
    Errors.CoordinatorNotAvailableError,
    Errors.KafkaConnectionError,
    Errors.KafkaTimeoutError,
    Errors.NodeNotReadyError,
    Errors.UnknownBrokerIdError,
)
_FENCED: tuple[type[Exception], ...] = (
    Errors.InvalidProducerEpochError,
    Errors.ProducerFencedError,
    Errors.InvalidProducerIdMappingError,
)


def _error_name(error: BaseException) -> str:
    return getattr(error, "message", None) or type(error).__name__


def classify_error(exc: Exception, request: str, transactional_id: str | None) -> TxnSessionError:
    """The session error for a non-retriable Kafka error: fenced, invalid state, or fatal."""
    kind: type[TxnSessionError] = (
        TxnFencedError if isinstance(exc, _FENCED)
        else TxnInvalidStateError if isinstance(exc, Errors.InvalidTxnStateError)
        else TxnFatalError
    )
    name = _error_name(exc)
    description = getattr(exc, "description", None) or str(exc)
    return kind(f"{request} for transactional id {transactional_id!r} failed with {name}: {description}",
                transactional_id, request, name)


def _raise_for(code: int) -> None:
    if code:
        raise Errors.for_code(code)()


_ID_PATTERN_VERSION = 2
"""ListTransactions takes a transactional id pattern from this version on (KIP-1152, Kafka 4.1)."""
RECEIVE_MESSAGE_MAX_BYTES = 100_000_000
"""The largest answer the session reads, unless ``receive.message.max.bytes`` says otherwise (librdkafka's default)."""
RECONNECT_BACKOFF_MAX_MS = 1000


class TransactionSession:
    """Coordinator RPCs for transactions started elsewhere. Thread-safe: calls from several threads run
    concurrently on one IO thread. Use as a context manager or call :meth:`close`.

    ``client_config`` takes librdkafka-style settings (see :mod:`.client_config`). ``request_timeout_s``
    bounds each request and the first connection (default: ``socket.timeout.ms`` from the config, else 30 s);
    retries back off exponentially from ``retry_backoff_s`` (capped at 1 s) and stop after ``operation_timeout_s``
    (or ``max_retries``, if given, whichever comes first). A broker's crash-restart takes 15-20 s: a count of
    retries would give up within it, as Kafka's Java clients, bounded by time alone, do not.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        client_config: Mapping[str, object] | None = None,
        request_timeout_s: float | None = None,
        retry_backoff_s: float = 0.1,
        max_retries: int | None = None,
        operation_timeout_s: float = OPERATION_TIMEOUT_S,
        enable_2pc: bool = False,
    ) -> None:
        settings = dict(translate(client_config or {}))
        settings["bootstrap_servers"] = bootstrap_servers
        if request_timeout_s is not None:
            settings["request_timeout_ms"] = int(request_timeout_s * 1000)
        settings.setdefault("request_timeout_ms", 30000)
        settings.setdefault("client_id", "spark-kafka-eos-txn")
        # Back within a second of a network blip's end, as Kafka's Java clients (kafka-python waits up to 30 s).
        settings.setdefault("reconnect_backoff_max_ms", RECONNECT_BACKOFF_MAX_MS)
        # librdkafka's default: kafka-python's (1 MB) refuses a ListTransactions answer of a cluster holding some
        # 16,000 transactional ids, which other applications' and this sink's past runs easily leave.
        settings.setdefault("receive_message_max_bytes", RECEIVE_MESSAGE_MAX_BYTES)
        # The RPCs of different transactional ids need no order among them, and phase 2 sends every participant's
        # EndTxn at once: at kafka-python's default of 5, the sixth would find the connection busy (NodeNotReady)
        # and wait 100 ms for a retry.
        settings["max_in_flight_requests_per_connection"] = _IN_FLIGHT_PER_CONNECTION
        self.bootstrap_servers = bootstrap_servers
        self._settings = settings
        self._timeout_ms: int = settings["request_timeout_ms"]  # type: ignore[assignment]
        self._retry_backoff_s = retry_backoff_s
        self._max_retries = max_retries
        self._operation_timeout_s = operation_timeout_s
        self._enable_2pc = enable_2pc
        self._two_pc: bool | None = None
        self._coordinators: dict[tuple[int, str], int] = {}
        self._closed = False
        # kafka-python 3.x has no kafka.client_async.KafkaClient; KafkaConnectionManager on a NetworkSelector
        # is what replaced it (KafkaNetClient wraps the same pair). Its IO thread lets several caller threads
        # run RPCs at once (e.g. phase-2 commits in parallel).
        self._net = NetworkSelector(**settings)
        self._manager = KafkaConnectionManager(self._net, **settings)
        self._net.start()

    def __repr__(self) -> str:
        return f"TransactionSession({redact(self._settings)!r})"

    def __enter__(self) -> TransactionSession:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection and stop the IO thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._net.run(self._manager.close)
        finally:
            self._net.close()

    # -- public API ---------------------------------------------------------------------------------------
    def describe(self, transactional_ids: Sequence[str]) -> dict[str, TxnDescription]:
        """DescribeTransactions for each id, each sent to its own coordinator."""
        ids = list(dict.fromkeys(transactional_ids))
        keys = [(int(CoordinatorType.TRANSACTION), txn_id) for txn_id in ids]
        return self._run("DescribeTransactions", ", ".join(ids), lambda: self._describe(ids), keys)

    def list_transactions(self, state_filters: Iterable[str] = (), producer_id_filters: Iterable[int] = (),
                          id_prefix: str | None = None) -> list[TxnListing]:
        """ListTransactions on every broker (each knows the ids it coordinates). ``id_prefix``: brokers that take
        a transactional id pattern (ListTransactions v2, KIP-1152) list only the ids that start with it, others
        list every id: filter by prefix yourself."""
        request: dict[str, Any] = {"state_filters": [str(s) for s in state_filters], "producer_id_filters": list(producer_id_filters)}
        return self._run("ListTransactions", None, lambda: self._list(request, id_prefix), [])

    def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int, producer_id: int = -1,
                         producer_epoch: int = -1, keep_prepared_txn: bool = False) -> tuple[int, int]:
        """InitProducerId: returns (producer id, producer epoch). On an id with an open transaction this fences its
        owner and aborts the transaction (the coordinator answers CONCURRENT_TRANSACTIONS until the abort is
        written; retried). ``keep_prepared_txn`` needs the 2PC mode (see :meth:`two_phase_commit_enabled`)."""
        two_pc = self.two_phase_commit_enabled()
        if keep_prepared_txn and not two_pc:
            raise ValueError("keep_prepared_txn needs enable_2pc=True and a broker advertising InitProducerId v6")
        version: dict[str, Any] = (
            {"min_version": INIT_PRODUCER_ID_2PC_VERSION, "enable2_pc": True, "keep_prepared_txn": keep_prepared_txn}
            if two_pc else {"max_version": INIT_PRODUCER_ID_MAX_VERSION}
        )

        def build() -> InitProducerIdRequest:
            return InitProducerIdRequest(transactional_id=transactional_id,
                                         transaction_timeout_ms=transaction_timeout_ms,
                                         producer_id=producer_id, producer_epoch=producer_epoch, **version)

        response = self._run_on_coordinator("InitProducerId", transactional_id, build)
        return response.producer_id, response.producer_epoch

    def commit(self, state: PreparedTxnState) -> None:
        """EndTxn(commit). Idempotent: committing an already committed transaction of the same
        producer id / epoch succeeds."""
        self._end_txn(state, committed=True)

    def abort(self, state: PreparedTxnState) -> None:
        """EndTxn(abort). Raises :class:`TxnInvalidStateError` if the transaction was committed."""
        self._end_txn(state, committed=False)

    def resume(self, state: PreparedTxnState) -> ResumedTxn:
        """A handle bound to one prepared transaction (commit / abort / send_offsets / describe)."""
        return ResumedTxn(self, state)

    def add_offsets_to_txn(self, state: PreparedTxnState, group_id: str) -> None:
        """AddOffsetsToTxn: make the group's offsets partition part of the transaction."""
        def build() -> AddOffsetsToTxnRequest:
            return AddOffsetsToTxnRequest(transactional_id=state.transactional_id, producer_id=state.producer_id,
                                          producer_epoch=state.producer_epoch, group_id=group_id,
                                          max_version=ADD_OFFSETS_TO_TXN_MAX_VERSION)

        self._run_on_coordinator("AddOffsetsToTxn", state.transactional_id, build)

    def txn_offset_commit(self, state: PreparedTxnState, group_id: str,
                          offsets: Mapping[tuple[str, int], int], metadata: str = "") -> None:
        """TxnOffsetCommit to the group coordinator: ``offsets`` become the group's committed offsets
        when (and only when) the transaction commits. Call :meth:`add_offsets_to_txn` first."""
        by_topic: dict[str, list[Any]] = defaultdict(list)
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic[topic].append(TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata))
        topics = [TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()]

        def build() -> TxnOffsetCommitRequest:
            return TxnOffsetCommitRequest(transactional_id=state.transactional_id, group_id=group_id,
                                          producer_id=state.producer_id, producer_epoch=state.producer_epoch,
                                          topics=topics, max_version=TXN_OFFSET_COMMIT_MAX_VERSION)

        def errors(response: Any) -> Iterable[int]:
            return (p.error_code for t in response.topics for p in t.partitions)

        key = (int(CoordinatorType.GROUP), group_id)
        self._run(f"TxnOffsetCommit(group {group_id})", state.transactional_id,
                  lambda: self._request_on(key, build, errors), [key])

    def describe_group(self, group_id: str, timeout_s: float | None = None) -> tuple[str, int]:
        """DescribeGroups at the group's coordinator: its state and how many members it has. Retried within
        ``timeout_s`` (default: the session's operation timeout)."""
        def build() -> DescribeGroupsRequest:
            return DescribeGroupsRequest(groups=[group_id], max_version=DESCRIBE_GROUPS_MAX_VERSION)

        key = (int(CoordinatorType.GROUP), group_id)
        response = self._run(f"DescribeGroups(group {group_id})", None,
                             lambda: self._request_on(key, build, lambda r: [g.error_code for g in r.groups]), [key],
                             timeout_s)
        [group] = response.groups
        return str(group.group_state), len(group.members)

    def wait_settled(self, transactional_ids: Sequence[str],
                     timeout_s: float | None = None) -> dict[str, TxnDescription]:
        """Poll DescribeTransactions until no id is in a Prepare* state. EndTxn returns once the
        coordinator has logged PrepareCommit / PrepareAbort; the markers (and so read_committed
        visibility) follow asynchronously. Raises :class:`TxnTimeoutError` after ``timeout_s``
        (default ``operation_timeout_s``)."""
        described: dict[str, TxnDescription] = {}
        moving: list[str] = []

        def settled() -> bool:
            nonlocal described, moving
            described = self.describe(transactional_ids)
            moving = sorted(i for i, d in described.items() if d.state in _TRANSITIONAL)
            return not moving

        if not wait_until(settled, Deadline(self._operation_timeout_s if timeout_s is None else timeout_s), self._backoff()):
            raise TxnTimeoutError(f"transactions {moving} did not complete in time", ", ".join(moving), "DescribeTransactions")
        return described

    def _backoff(self) -> Backoff:
        return Backoff(self._retry_backoff_s, _MAX_BACKOFF_S)

    def api_versions(self) -> dict[str, tuple[int, int]]:
        """The (min, max) version of each API the bootstrap broker advertises, by API name."""
        self._net_run(self._bootstrap)
        names = {int(k): k.name for k in ApiKey}
        versions = self._manager.broker_version_data.api_versions
        return {names.get(key, str(key)): (lo, hi) for key, (lo, hi) in versions.items()}

    def two_phase_commit_enabled(self) -> bool:
        """True when ``enable_2pc`` was asked for and the broker advertises InitProducerId v6 (KIP-939)."""
        if self._two_pc is None:
            self._two_pc = self._enable_2pc and (
                self.api_versions().get("InitProducerId", (0, -1))[1] >= INIT_PRODUCER_ID_2PC_VERSION)
            if self._enable_2pc and not self._two_pc:
                log.warning("enable_2pc ignored: %s does not advertise InitProducerId v6", self.bootstrap_servers)
        return self._two_pc

    # -- RPC helpers (coroutines run on the IO thread) ------------------------------------------------------
    def _end_txn(self, state: PreparedTxnState, committed: bool) -> None:
        def build() -> EndTxnRequest:
            return EndTxnRequest(transactional_id=state.transactional_id, producer_id=state.producer_id,
                                 producer_epoch=state.producer_epoch, committed=committed, max_version=END_TXN_MAX_VERSION)

        request = "EndTxn(commit)" if committed else "EndTxn(abort)"
        self._run_on_coordinator(request, state.transactional_id, build)

    def _run_on_coordinator(self, request: str, transactional_id: str, build: Callable[[], Any]) -> Any:
        """Send ``build()`` to the transaction coordinator; the response has one top-level error code."""
        key = (int(CoordinatorType.TRANSACTION), transactional_id)
        return self._run(request, transactional_id,
                         lambda: self._request_on(key, build, lambda r: [r.error_code]), [key])

    async def _request_on(self, key: tuple[int, str], build: Callable[[], Any],
                          errors: Callable[[Any], Iterable[int]]) -> Any:
        response = await self._send(build(), await self._coordinator(*key))
        for code in errors(response):
            _raise_for(code)
        return response

    async def _send(self, request: Any, node_id: Any) -> Any:
        future = self._manager.send(request, node_id=node_id, request_timeout_ms=self._timeout_ms)
        return await self._manager.wait_for(future, self._timeout_ms)

    async def _coordinator(self, key_type: int, key: str) -> int:
        return (await self._coordinators_of(key_type, [key]))[key]

    async def _coordinators_of(self, key_type: int, keys: list[str]) -> dict[str, int]:
        """The coordinator node of each key: cached ones from the cache, the others in one FindCoordinator
        (version 4 and later take many keys; older brokers are asked key by key)."""
        unknown = [key for key in dict.fromkeys(keys) if (key_type, key) not in self._coordinators]
        if unknown and self._manager.broker_version_data.api_version(FindCoordinatorRequest) >= 4:
            request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=unknown, min_version=4)
            for answer in (await self._send(request, None)).coordinators:
                self._remember_coordinator(key_type, answer.key, answer)
        else:
            for key in unknown:
                request = FindCoordinatorRequest(key=key, key_type=key_type, max_version=3)
                self._remember_coordinator(key_type, key, await self._send(request, None))
        if any((key_type, key) not in self._coordinators for key in keys):
            raise Errors.CoordinatorNotAvailableError("FindCoordinator left a key unanswered")  # retried
        return {key: self._coordinators[(key_type, key)] for key in keys}

    def _remember_coordinator(self, key_type: int, key: str, answer: Any) -> None:
        _raise_for(answer.error_code)
        self._coordinators[(key_type, key)] = self._manager.cluster.add_coordinator(answer, key_type, key, synthesize_node_id=False)

    async def _describe(self, ids: list[str]) -> dict[str, TxnDescription]:
        by_node: dict[int, list[str]] = defaultdict(list)
        for txn_id, node_id in (await self._coordinators_of(int(CoordinatorType.TRANSACTION), ids)).items():
            by_node[node_id].append(txn_id)
        out: dict[str, TxnDescription] = {}
        for node_id, node_ids in by_node.items():
            response = await self._send(DescribeTransactionsRequest(transactional_ids=node_ids), node_id)
            for txn in response.transaction_states:
                if txn.error_code == Errors.TransactionalIdNotFoundError.errno:
                    out[txn.transactional_id] = TxnDescription(txn.transactional_id, TxnState.NOT_FOUND, -1, -1, -1, -1)
                    continue
                _raise_for(txn.error_code)
                out[txn.transactional_id] = TxnDescription(
                    txn.transactional_id, _state(txn.transaction_state), txn.producer_id, txn.producer_epoch,
                    txn.transaction_timeout_ms, txn.transaction_start_time_ms,
                    {t.topic: tuple(sorted(t.partitions)) for t in txn.topics},
                )
        return out

    async def _list(self, request: dict[str, Any], id_prefix: str | None = None) -> list[TxnListing]:
        """Ask every broker in the metadata, in rounds, until one round in which all answer.

        A crashed broker stays in the metadata until the controller fences it; only then do its
        transactions move, with the leadership of __transaction_state, to brokers that answer
        COORDINATOR_LOAD_IN_PROGRESS while they load them. Each round is asked on fresh metadata;
        after ``_LIST_SETTLE_S``, what the last round's brokers listed is used (the rest are left to
        their transaction timeout) and a warning names them.
        """
        if id_prefix is not None and self._manager.broker_version_data.api_version(ListTransactionsRequest) >= _ID_PATTERN_VERSION:
            # Java's regular expressions take a backslash before any character that is not a letter or a digit.
            request = {**request, "transactional_id_pattern": "^" + re.escape(id_prefix) + ".*", "min_version": _ID_PATTERN_VERSION}
        deadline = Deadline(min(self._operation_timeout_s, _LIST_SETTLE_S))
        delays = self._backoff().delays()
        failed: dict[int, Exception] = {}
        retry = 0
        while True:
            try:  # a cached session's metadata may predate a broker's restart or crash
                await self._manager.cluster.refresh_metadata()
            except Errors.KafkaError as exc:
                log.debug("Metadata refresh before ListTransactions failed: %s", exc)
            found: dict[str, TxnListing] = {}
            answered: list[int] = []
            unanswered: list[int] = []
            for broker in self._manager.cluster.brokers():
                try:
                    response = await self._send(ListTransactionsRequest(**request), broker.node_id)
                    _raise_for(response.error_code)
                except Errors.InvalidReceiveError as exc:
                    # An answer this session cannot read comes again in the next round: leaving the broker's
                    # transactions out of the listing would let a sweep miss them.
                    raise Errors.InvalidReceiveError(
                        f"{exc.args[0] if exc.args else exc} from broker {broker.node_id}: its answer is larger than receive.message.max.bytes "
                        f"({self._settings['receive_message_max_bytes']} bytes); raise that setting") from None
                except Errors.KafkaError as exc:
                    failed[broker.node_id] = exc
                    unanswered.append(broker.node_id)
                    continue
                answered.append(broker.node_id)
                for txn in response.transaction_states:
                    found[txn.transactional_id] = TxnListing(txn.transactional_id, txn.producer_id,
                                                             _state(txn.transaction_state))
            log.debug("ListTransactions round %d: answered by %s, not by %s", retry + 1, sorted(answered),
                      sorted(unanswered))
            delay = next(delays)
            if not unanswered or deadline.passed(delay):
                break
            await self._net.sleep(delay)
            retry += 1
        if unanswered and not answered:
            raise failed[unanswered[0]]
        if failed:
            names = ", ".join(str(node) for node in sorted(failed))
            if unanswered:
                outcome = (f"still failing on {', '.join(map(str, unanswered))} after {_LIST_SETTLE_S:.0f}s: "
                           "the transactions they coordinate are left to their timeout")
            else:
                outcome = f"listed again once every broker in the metadata answered ({', '.join(map(str, answered))})"
            log.warning("ListTransactions failed on broker(s) %s (%s); %s", names, next(iter(failed.values())), outcome)
        return sorted(found.values(), key=lambda t: t.transactional_id)

    # -- retries and error classification -----------------------------------------------------------------
    def _run(self, request: str, transactional_id: str | None, attempt: Callable[[], Awaitable[T]],
             coordinator_keys: Sequence[tuple[int, str]], timeout_s: float | None = None) -> T:
        """Run ``attempt`` on the IO thread, retrying retriable errors within ``timeout_s`` (default: the
        operation timeout); raise a classified error."""
        async def retrying() -> T:
            await self._bootstrap()
            deadline = Deadline(self._operation_timeout_s if timeout_s is None else timeout_s)
            delays = self._backoff().delays()
            retry = 0
            while True:
                try:
                    return await attempt()
                except Errors.KafkaError as exc:
                    if not isinstance(exc, _RETRIABLE + _REDISCOVER):
                        raise classify_error(exc, request, transactional_id) from None
                    if isinstance(exc, _REDISCOVER):
                        for key in coordinator_keys:
                            self._coordinators.pop(key, None)
                    delay = next(delays)
                    if retry == self._max_retries or deadline.passed(delay):
                        raise TxnTimeoutError(
                            f"{request} for transactional id {transactional_id!r} still failing with "
                            f"{_error_name(exc)} after {retry + 1} attempts", transactional_id, request,
                            _error_name(exc)) from None
                    log.info("%s for transactional id %r: %s, retry %d in %.2fs",
                             request, transactional_id, _error_name(exc), retry + 1, delay)
                    await self._net.sleep(delay)
                    retry += 1

        return self._net_run(retrying)

    async def _bootstrap(self) -> None:
        if self._manager.bootstrapped:
            return
        try:
            await self._manager.bootstrap_async(self._timeout_ms)
        except Errors.KafkaTimeoutError:
            raise TxnTimeoutError(
                f"no Kafka broker answered at {self.bootstrap_servers} within {self._timeout_ms / 1000:g}s",
                error="KafkaTimeoutError") from None
        except Errors.KafkaError as exc:
            raise TxnFatalError(f"cannot connect to {self.bootstrap_servers}: {_error_name(exc)}",
                                error=_error_name(exc)) from None

    def _net_run(self, coroutine: Callable[[], Awaitable[T]]) -> T:
        if self._closed:
            raise TxnFatalError("the TransactionSession is closed")
        return self._net.run(coroutine)


@dataclass(frozen=True)
class ResumedTxn:
    """A prepared transaction bound to a session: ``session.resume(state).commit()``."""

    session: TransactionSession
    state: PreparedTxnState

    def commit(self) -> None:
        """EndTxn(commit) of this transaction (see :meth:`TransactionSession.commit`)."""
        self.session.commit(self.state)

    def abort(self) -> None:
        """EndTxn(abort) of this transaction (see :meth:`TransactionSession.abort`)."""
        self.session.abort(self.state)

    def describe(self) -> TxnDescription:
        """DescribeTransactions of its transactional id."""
        return self.session.describe([self.state.transactional_id])[self.state.transactional_id]
