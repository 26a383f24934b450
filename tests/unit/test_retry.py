"""The package's retry policy: listed Kafka errors are asked again within the deadline; others, and the
last one at the deadline, are raised as they came."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from spark_kafka_eos.retry import COORDINATOR_MOVING, Deadline, retry_kafka


def failing(codes: list[int], result: str = "done") -> tuple[list[Deadline], object]:
    calls: list[Deadline] = []

    def call(deadline: Deadline) -> str:
        calls.append(deadline)
        if len(calls) <= len(codes):
            raise KafkaException(KafkaError(codes[len(calls) - 1]))
        return result

    return calls, call


def test_retriable_errors_are_asked_again_until_the_call_returns() -> None:
    calls, call = failing([KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS])
    assert retry_kafka(call, 5, COORDINATOR_MOVING, backoff_s=0.001) == "done"  # type: ignore[arg-type]
    assert len(calls) == 3 and all(0.1 <= d.left() <= 5 for d in calls)


def test_other_errors_are_raised_at_once() -> None:
    calls, call = failing([KafkaError.GROUP_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaException) as raised:
        retry_kafka(call, 5, COORDINATOR_MOVING, backoff_s=0.001)  # type: ignore[arg-type]
    assert raised.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED and len(calls) == 1


def test_the_last_error_is_raised_at_the_deadline() -> None:
    calls, call = failing([KafkaError.NOT_COORDINATOR] * 1000)
    with pytest.raises(KafkaException) as raised:
        retry_kafka(call, 0.05, COORDINATOR_MOVING, backoff_s=0.01)  # type: ignore[arg-type]
    assert raised.value.args[0].code() == KafkaError.NOT_COORDINATOR and 2 <= len(calls) < 1000
