"""The guard process's bookkeeping: which transactions its worker left open when the pipe closed."""

from __future__ import annotations

import io
import json
import sys

import pytest

from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.write import transaction_guard_process
from spark_kafka_eos._internal.write.transaction_guard import Abandoned


def messages(*lines: dict[str, object]) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in lines)))


def opened(txn_id: str) -> dict[str, object]:
    return {"op": "open", "id": txn_id, "bootstrap_servers": "b:9092",
            "settings": [["security.protocol", "SASL_SSL"]]}


def test_only_transactions_opened_and_never_released_are_left_open(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", messages(
        opened("p-1"), opened("p-2"), {"op": "identity", "id": "p-2", "producer_id": 7, "producer_epoch": 3},
        {"op": "release", "id": "p-1"}, opened("p-3"), {"op": "release", "id": "p-3"},
        {"op": "identity", "id": "unknown", "producer_id": 1, "producer_epoch": 1},
    ))
    left = transaction_guard_process._listen()
    assert list(left) == ["p-2"]
    assert Abandoned.of(left["p-2"]) == Abandoned(
        "p-2", KafkaConnection("b:9092", (("security.protocol", "SASL_SSL"),)), 7, 3)


def test_a_worker_that_handed_everything_over_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", messages(opened("p-1"), {"op": "release", "id": "p-1"}))
    assert transaction_guard_process._listen() == {}
