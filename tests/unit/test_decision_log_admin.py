"""The decision log's check of its topic's cleanup policy asks a new admin client when the kept one times out."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigEntry, ConfigResource

from spark_kafka_eos._internal.decision_log import kafka_log as decision_log_module
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.txn.session import PreparedTxnState
from spark_kafka_eos.errors import KafkaEosDecisionLogError
from tests.unit.fakes import options as writer_options


class _Admin:
    """Answers DescribeConfigs with ``error``, or with a compacted topic."""

    def __init__(self, error: int | None = None) -> None:
        self.error = error
        self.calls = 0

    def describe_configs(self, resources: Sequence[ConfigResource], request_timeout: float) -> dict[ConfigResource, Future]:
        self.calls += 1
        answer: Future = Future()
        if self.error is not None:
            answer.set_exception(KafkaException(KafkaError(self.error)))
        else:
            answer.set_result({"cleanup.policy": ConfigEntry("cleanup.policy", "compact")})
        return {resources[0]: answer}


def test_a_describe_that_times_out_is_asked_again_of_a_new_admin_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a broker's SIGKILL the kept client may wait for the dead controller until its request times out."""
    stale, fresh = _Admin(KafkaError._TIMED_OUT), _Admin()
    monkeypatch.setattr(decision_log_module, "renew_admin_client", lambda connection: fresh)
    log = KafkaDecisionLog(writer_options("p"))
    log._admin = stale  # type: ignore[assignment]
    log._check_cleanup_policy()
    assert (stale.calls, fresh.calls) == (1, 1)


def test_other_errors_are_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    stale, fresh = _Admin(KafkaError.POLICY_VIOLATION), _Admin()
    monkeypatch.setattr(decision_log_module, "renew_admin_client", lambda connection: fresh)
    log = KafkaDecisionLog(writer_options("p"))
    log._admin = stale  # type: ignore[assignment]
    with pytest.raises(KafkaException):
        log._check_cleanup_policy()
    assert (stale.calls, fresh.calls) == (1, 0)


def test_a_producer_replacing_the_operations_own_must_take_the_ids_next_epoch() -> None:
    """The coordinator producer of an operation is replaced when its commit's answer was lost; another driver may have
    initialised the id in between, and the operation must not write what it read before."""
    mine = PreparedTxnState("p-coordinator", 7, 3)
    KafkaDecisionLog._refuse_unless_successor("p", None, mine)  # the operation's first fence
    KafkaDecisionLog._refuse_unless_successor("p", mine, PreparedTxnState("p-coordinator", 7, 4))
    for other in (PreparedTxnState("p-coordinator", 7, 5), PreparedTxnState("p-coordinator", 8, 0)):
        with pytest.raises(KafkaEosDecisionLogError, match="no longer owns prefix p"):
            KafkaDecisionLog._refuse_unless_successor("p", mine, other)


def test_a_replacing_producer_that_is_not_the_successor_is_dropped_and_refused_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another driver initialised the id between the operation's fence and its new producer: that producer (which now
    holds the id) is never used, so a retried step (the sweep's next proof, say) cannot append what was read before."""
    held = iter(PreparedTxnState("p-coordinator", 7, epoch) for epoch in (3, 5, 6))

    class Described:
        def __init__(self, state: PreparedTxnState) -> None:
            self.state = state

        def prepared_state(self) -> PreparedTxnState:
            return self.state

    class Session:
        def describe(self, ids: Sequence[str]) -> dict[str, Described]:
            return {txn_id: Described(next(held)) for txn_id in ids}

    monkeypatch.setattr(decision_log_module, "cached_session", lambda connection: Session())
    monkeypatch.setattr(decision_log_module, "start_transactional_producer", lambda config, topic, timeout: object())
    decision_log = KafkaDecisionLog(writer_options())
    decision_log.fence("p")  # the operation's fence: epoch 3
    decision_log._producer = None  # its commit's answer was lost: its next transaction needs a new producer
    for _ in range(2):
        with pytest.raises(KafkaEosDecisionLogError, match="no longer owns prefix p"):
            decision_log.fence("p")
