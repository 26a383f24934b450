"""TransactionSession without a broker: prepared-transaction identities, error classification, timeouts,
and the API that needs no request (2PC refused unless enabled, the resumed handle)."""

from __future__ import annotations

import kafka.errors as Errors
import pytest

import spark_kafka_eos._internal.txn.session as session_module
from spark_kafka_eos._internal.txn.session import (
    PreparedTxnState,
    ResumedTxn,
    TransactionSession,
    TxnDescription,
    TxnFatalError,
    TxnFencedError,
    TxnInvalidStateError,
    TxnSessionError,
    TxnState,
    TxnTimeoutError,
    classify_error,
)
from tests.harness.local_kafka import free_loopback_port


def test_unreachable_broker_is_a_timeout_naming_the_address() -> None:
    address = f"127.0.0.1:{free_loopback_port()}"
    with TransactionSession(address, request_timeout_s=1.0) as session, pytest.raises(
        TxnTimeoutError, match=address.replace(".", r"\.")
    ):
        session.describe(["any"])


@pytest.mark.parametrize(
    "text, state",
    [
        ("orders-etl-3-0:4711:2", PreparedTxnState("orders-etl-3-0", 4711, 2)),
        ("a:b::c:17:0", PreparedTxnState("a:b::c", 17, 0)),
        ("x:-1:-1", PreparedTxnState("x", -1, -1)),
    ],
)
def test_prepared_state_round_trip(text: str, state: PreparedTxnState) -> None:
    assert PreparedTxnState.parse(text) == state
    assert PreparedTxnState.parse(state.serialize()) == state
    assert state.serialize() == text


@pytest.mark.parametrize("text", ["", "no-numbers", "id:1", ":1:2", "id:x:2", "id:1:2.5"])
def test_prepared_state_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        PreparedTxnState.parse(text)


@pytest.mark.parametrize(
    "error, kind",
    [
        (Errors.ProducerFencedError, TxnFencedError),
        (Errors.InvalidProducerEpochError, TxnFencedError),
        (Errors.InvalidProducerIdMappingError, TxnFencedError),
        (Errors.InvalidTxnStateError, TxnInvalidStateError),
        (Errors.TransactionalIdAuthorizationFailedError, TxnFatalError),
    ],
)
def test_error_classification_names_id_request_and_error(
    error: type[Errors.BrokerResponseError], kind: type[TxnSessionError]
) -> None:
    classified = classify_error(error(), "EndTxn(commit)", "etl-0-0")
    assert type(classified) is kind
    assert classified.error == error.message and classified.transactional_id == "etl-0-0"
    assert all(part in str(classified) for part in ("etl-0-0", "EndTxn(commit)", str(error.message)))


def test_keeping_a_prepared_transaction_needs_the_2pc_mode() -> None:
    # Refused before any request: nothing listens on this address.
    with TransactionSession("127.0.0.1:9") as session, pytest.raises(ValueError, match="enable_2pc"):
        session.init_producer_id("etl-0-0", 60_000, keep_prepared_txn=True)


class _RecordingSession:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def commit(self, state: PreparedTxnState) -> None:
        self.calls.append(("commit", state))

    def abort(self, state: PreparedTxnState) -> None:
        self.calls.append(("abort", state))

    def describe(self, ids: list[str]) -> dict[str, TxnDescription]:
        self.calls.append(("describe", tuple(ids)))
        return {i: TxnDescription(i, TxnState.ONGOING, 17, 0, 60_000, 1) for i in ids}


def test_a_resumed_transaction_acts_on_its_own_identity() -> None:
    session, state = _RecordingSession(), PreparedTxnState("etl-0-0", 17, 0)
    resumed = ResumedTxn(session, state)  # type: ignore[arg-type]
    resumed.commit()
    resumed.abort()
    assert resumed.describe().prepared_state() == state
    assert session.calls == [("commit", state), ("abort", state), ("describe", ("etl-0-0",))]


def test_a_retriable_error_is_retried_until_the_operation_timeout_however_many_attempts_it_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A broker's crash-restart takes 15-20 s, some 20 attempts at a backoff capped at 1 s: a count of retries
    # failed the task (and with it the stream) while the broker came back.
    monkeypatch.setattr(session_module, "_MAX_BACKOFF_S", 0.001)
    attempts = 0

    async def attempt() -> str:
        nonlocal attempts
        attempts += 1
        if attempts <= 60:
            raise Errors.KafkaConnectionError("broker down")
        return "answered"

    async def bootstrapped() -> None:
        return None

    async def never_answered() -> str:
        raise Errors.KafkaConnectionError("broker down")

    with TransactionSession("127.0.0.1:9", retry_backoff_s=0.001, operation_timeout_s=30) as session:
        monkeypatch.setattr(session, "_bootstrap", bootstrapped)
        assert session._run("DescribeTransactions", "etl-0-0", attempt, []) == "answered"
        assert attempts == 61
    with TransactionSession("127.0.0.1:9", retry_backoff_s=0.001, operation_timeout_s=0.5) as bounded:
        monkeypatch.setattr(bounded, "_bootstrap", bootstrapped)
        with pytest.raises(TxnTimeoutError, match="still failing with KafkaConnectionError"):
            bounded._run("DescribeTransactions", "etl-0-0", never_answered, [])
