"""A task's transactional producers: one protocol (:mod:`.producer_client`), one module per client library
(:mod:`.native`, the compiled extension over librdkafka; :mod:`.confluent`, confluent-kafka's producer), and
:func:`open_producer`, which picks one by ``writeEngine`` (:func:`~spark_kafka_eos._internal.native.engine.choose_client`)."""

from __future__ import annotations

from collections.abc import Mapping

from spark_kafka_eos._internal.native.engine import Engine, choose_client
from spark_kafka_eos._internal.write.producers.confluent import ConfluentProducer
from spark_kafka_eos._internal.write.producers.native import open_native_producer
from spark_kafka_eos._internal.write.producers.producer_client import ProducerClient


def open_producer(config: Mapping[str, object], engine: Engine) -> ProducerClient:
    """A producer of ``config`` (a task's producer configuration): the compiled one unless ``engine`` is python
    (``auto``: where it is installed and can run the configuration; ``native``: or an error), else
    confluent-kafka's."""
    def open_python() -> ProducerClient:
        return ConfluentProducer(config)

    return choose_client(engine, lambda required: open_native_producer(config, required=required), open_python)
