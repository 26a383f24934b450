"""Where a client library's error becomes the package's: the pure-Python producer's refusals after a full queue,
the CLI's one line, a compiled wheel older than its error names, and the error crossing a process boundary."""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException

from spark_kafka_eos._internal.client_errors import ClientCallError, ClientError, KafkaErrorCode
from spark_kafka_eos._internal.error_text import error_text
from spark_kafka_eos._internal.native import clients as compiled
from spark_kafka_eos._internal.write.input_schema import InputColumns
from spark_kafka_eos._internal.write.producers.confluent import ConfluentProducer
from spark_kafka_eos.errors import KafkaEosWriteError


class _FullThenRefusing:
    """confluent-kafka's producer whose queue is full once, then refuses the record."""

    def __init__(self) -> None:
        self.calls = 0

    def produce(self, *_: Any) -> None:
        self.calls += 1
        if self.calls == 1:
            raise BufferError("Local: Queue full")
        raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))

    def poll(self, _timeout: float = 0) -> int:
        return 0


def test_a_record_refused_once_the_queue_has_room_is_the_tasks_write_error() -> None:
    producer = ConfluentProducer({})
    refusing = _FullThenRefusing()
    producer._producer = refusing  # type: ignore[assignment]
    batch = pa.record_batch({"value": pa.array([b"v"])})
    with pytest.raises(KafkaEosWriteError, match="MSG_SIZE_TOO_LARGE") as raised:
        producer.produce(batch, InputColumns.of(["value"]), "out", "tid-0", 5.0)
    assert refusing.calls == 2 and raised.value.code == KafkaErrorCode.MSG_SIZE_TOO_LARGE


def test_the_cli_prints_a_client_call_error_as_a_kafka_error() -> None:
    error = ClientCallError(ClientError(-185, "_TIMED_OUT", "Local: Timed out"))
    assert error_text(error) == "Kafka: Local: Timed out"


def test_a_compiled_wheel_without_error_names_still_reports_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiled, "native_module", lambda: SimpleNamespace())
    with pytest.raises(ClientCallError) as raised:
        compiled.raise_compiled_error(KafkaErrorCode.TIMED_OUT)
    assert (raised.value.error.code, raised.value.error.name) == (-185, "_TIMED_OUT")
    assert compiled.compiled_client_error(12345).name == "12345"


def test_a_client_call_error_survives_pickling() -> None:
    error = ClientCallError(ClientError(90, "PRODUCER_FENCED", "Broker: fenced", fatal=True))
    copy = pickle.loads(pickle.dumps(error))
    assert copy.error == error.error and str(copy) == str(error)
