"""The decision log's check of its topic's cleanup policy asks a new admin client when the kept one times out."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigEntry, ConfigResource

from spark_kafka_eos.errors import KafkaEosDecisionLogError
from spark_kafka_eos.txn.session import PreparedTxnState
from spark_kafka_eos.write import decision_log as decision_log_module
from spark_kafka_eos.write.decision_log import DecisionLog
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
    log = DecisionLog(writer_options("p"))
    log._admin = stale  # type: ignore[assignment]
    log._check_cleanup_policy()
    assert (stale.calls, fresh.calls) == (1, 1)


def test_other_errors_are_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    stale, fresh = _Admin(KafkaError.POLICY_VIOLATION), _Admin()
    monkeypatch.setattr(decision_log_module, "renew_admin_client", lambda connection: fresh)
    log = DecisionLog(writer_options("p"))
    log._admin = stale  # type: ignore[assignment]
    with pytest.raises(KafkaException):
        log._check_cleanup_policy()
    assert (stale.calls, fresh.calls) == (1, 0)


def test_a_producer_replacing_the_operations_own_must_take_the_ids_next_epoch() -> None:
    """The coordinator producer of an operation is replaced when its commit's answer was lost; another driver may have
    initialised the id in between, and the operation must not write what it read before."""
    mine = PreparedTxnState("p-coordinator", 7, 3)
    DecisionLog._refuse_unless_successor("p", None, mine)  # the operation's first fence
    DecisionLog._refuse_unless_successor("p", mine, PreparedTxnState("p-coordinator", 7, 4))
    for other in (PreparedTxnState("p-coordinator", 7, 5), PreparedTxnState("p-coordinator", 8, 0)):
        with pytest.raises(KafkaEosDecisionLogError, match="no longer owns prefix p"):
            DecisionLog._refuse_unless_successor("p", mine, other)
