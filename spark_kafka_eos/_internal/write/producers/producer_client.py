"""What a task's transaction asks of its producer, so that one set of write rules
(:mod:`~spark_kafka_eos._internal.write.task_producer`) drives either write path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import pyarrow as pa

from spark_kafka_eos._internal.write.delivery_reports import DeliveryTally
from spark_kafka_eos._internal.write.input_schema import InputColumns


class ProducerClient(Protocol):
    """A task's transactional producer, on one of the two write paths: confluent-kafka's
    (:class:`~spark_kafka_eos._internal.write.producers.confluent.ConfluentProducer`) or the compiled one
    (:class:`~spark_kafka_eos._internal.write.producers.native.NativeProducer`).
    Failing calls raise :class:`~spark_kafka_eos._internal.client_errors.ClientCallError` (warm_up, start, begin, abort) or
    :class:`KafkaEosWriteError` (produce)."""

    def warm_up(self, topic: str, timeout_s: float) -> None:
        """Bring the broker connection up (metadata requests only: nothing on the broker changes)."""

    def start(self, warm_up_topic: str, timeout_s: float, before_init: Callable[[], None] | None) -> None:
        """Warm up unless :meth:`warm_up` did, run ``before_init``, and init_transactions (fencing any earlier
        holder of the id)."""

    def begin(self) -> None: ...

    def produce(self, batch: pa.RecordBatch, columns: InputColumns, topic_option: str | None, transactional_id: str,
                queue_timeout_s: float) -> None:
        """Produce every row of ``batch``, waiting up to ``queue_timeout_s`` for room in a full queue."""

    def poll(self, timeout_s: float) -> None: ...

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for every delivery report; the number of records still unacknowledged."""

    def failed(self) -> bool:
        """Whether a delivery failed."""

    def deliveries(self) -> DeliveryTally: ...

    @property
    def identity(self) -> tuple[int, int] | None:
        """Producer id and epoch, once librdkafka's statistics have reported them."""

    def abort(self, timeout_s: float) -> None: ...

    def release(self) -> None:
        """Free the producer without aborting its transaction."""
