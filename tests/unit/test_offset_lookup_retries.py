"""The driver's offset look-ups: what a failed look-up becomes (no broker needed: nothing answers)."""

from __future__ import annotations

import pytest

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.offset_lookup import KafkaOffsetLookup
from spark_kafka_eos.errors import KafkaEosUnavailableError


def test_a_future_that_times_out_is_reported_as_unavailable_after_the_retries() -> None:
    options = parse_reader_options({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
                                    "fetchoffset.numretries": "2", "fetchoffset.retryintervalms": "1"}, streaming=False)
    calls = []

    def waits_in_vain() -> None:
        calls.append(1)
        raise TimeoutError()

    with pytest.raises(KafkaEosUnavailableError, match=r"did not answer 'list offsets' within .* \(3 attempt\(s\)\).*fetchOffset.numRetries"):
        KafkaOffsetLookup(options)._retrying("list offsets", waits_in_vain)
    assert len(calls) == 3


def test_the_unavailable_error_carries_the_kafka_code_behind_it() -> None:
    from confluent_kafka import KafkaError

    options = parse_reader_options({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
                                    "fetchoffset.numretries": "0"}, streaming=False)

    def waits_in_vain() -> None:
        raise TimeoutError()

    with pytest.raises(KafkaEosUnavailableError) as raised:
        KafkaOffsetLookup(options)._retrying("list offsets", waits_in_vain)
    assert raised.value.code == KafkaError._TIMED_OUT


@pytest.mark.parametrize("code", ["UNKNOWN_LEADER_EPOCH", "FENCED_LEADER_EPOCH"])
def test_a_leader_epoch_the_broker_and_the_client_do_not_agree_on_yet_is_asked_again(code: str) -> None:
    # A broker back from a crash answers UNKNOWN_LEADER_EPOCH until it has caught up with the leader epoch its restart
    # raised: found by make bench-faults, where the planner's look-up failed the stream.
    from confluent_kafka import KafkaError, KafkaException

    options = parse_reader_options({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
                                    "fetchoffset.numretries": "3", "fetchoffset.retryintervalms": "1"}, streaming=False)
    answers = [KafkaException(KafkaError(getattr(KafkaError, code))), KafkaException(KafkaError(getattr(KafkaError, code)))]

    def catching_up() -> str:
        if answers:
            raise answers.pop()
        return "listed"

    assert KafkaOffsetLookup(options)._retrying("list offsets", catching_up) == "listed"
