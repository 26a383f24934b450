"""The package's retry policy: listed Kafka errors are asked again within the deadline; others, and the
last one at the deadline, are raised as they came."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from spark_kafka_eos._internal.retry import (
    COORDINATOR_MOVING,
    OFFSET_INVALID,
    UNANSWERED,
    Backoff,
    Deadline,
    kafka_codes,
    listed_offset,
    retry,
    retry_kafka,
    wait_until,
)


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


def test_the_backoff_doubles_up_to_its_cap_and_is_constant_without_one() -> None:
    doubling, constant = Backoff(0.1, 0.5).delays(), Backoff(0.2).delays()
    assert [next(doubling) for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    assert [next(constant) for _ in range(3)] == [0.2, 0.2, 0.2]


def test_retry_stops_after_its_attempts_and_tells_each_retry() -> None:
    calls, call = failing([KafkaError.NOT_COORDINATOR] * 10)
    told: list[float] = []
    with pytest.raises(KafkaException):
        retry(call, Deadline.never(), kafka_codes(COORDINATOR_MOVING), Backoff(0.001), attempts=3,  # type: ignore[arg-type]
              on_retry=lambda _, wait: told.append(wait))
    assert len(calls) == 3 and told == [0.001, 0.001]


def test_kafka_codes_may_also_take_what_librdkafka_flags_retriable() -> None:
    flagged = KafkaException(KafkaError(KafkaError.NOT_ENOUGH_REPLICAS, retriable=True))
    assert not kafka_codes(COORDINATOR_MOVING)(flagged)
    assert kafka_codes(COORDINATOR_MOVING, or_flagged_retriable=True)(flagged)
    assert not kafka_codes(COORDINATOR_MOVING, or_flagged_retriable=True)(ValueError("not Kafka's"))


def test_wait_until_asks_until_the_condition_holds_or_its_attempts_are_spent() -> None:
    answers = iter([False, False, True])
    assert wait_until(lambda: next(answers), Deadline.never(), Backoff(0.001))
    asked: list[int] = []
    assert not wait_until(lambda: asked.append(1) is not None, Deadline.never(), Backoff(0.001), attempts=4)
    assert len(asked) == 4
    assert not wait_until(lambda: False, Deadline(0.02), Backoff(0.005))


def test_an_offset_look_up_answered_without_an_offset_is_retried_not_taken_for_an_offset() -> None:
    """librdkafka's list_offsets gives -1001 with no error when its answer was lost (seen through the fault proxy):
    taken as an offset, it read as data loss."""
    assert listed_offset(42) == 42 and listed_offset(-1) == -1
    with pytest.raises(KafkaException) as lost:
        listed_offset(OFFSET_INVALID)
    assert lost.value.args[0].code() == KafkaError._TIMED_OUT and kafka_codes(UNANSWERED)(lost.value)
