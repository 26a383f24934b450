"""A librdkafka call that never returns is given up on after its bound; one that returns or raises is unchanged."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from spark_kafka_eos._internal.txn import bounded_call
from spark_kafka_eos._internal.txn.bounded_call import AbandonedCallError, abandoned_calls, bounded


def test_a_call_that_returns_or_raises_is_passed_through() -> None:
    assert bounded(lambda: 42, 1.0, "answer") == 42
    with pytest.raises(KafkaException) as raised:
        bounded(lambda: (_ for _ in ()).throw(KafkaException(KafkaError(KafkaError._FENCED))), 1.0, "fenced")
    assert raised.value.args[0].code() == KafkaError._FENCED and not isinstance(raised.value, AbandonedCallError)


def test_a_call_that_never_returns_is_given_up_on_after_its_timeout_and_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded_call, "GRACE_S", 0.2)
    release = threading.Event()
    before = abandoned_calls()
    started = time.monotonic()
    with pytest.raises(AbandonedCallError) as raised:
        bounded(lambda: release.wait(60), 0.3, "send_offsets_to_transaction")
    waited = time.monotonic() - started
    release.set()
    error = raised.value.args[0]
    assert 0.5 <= waited < 5, waited
    assert error.code() == KafkaError._TIMED_OUT and not error.retriable()
    assert "send_offsets_to_transaction did not return within 0.5s" in error.str() and "replaced" in error.str()
    assert abandoned_calls() == before + 1
