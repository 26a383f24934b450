"""A task's transactional producers: one protocol (:mod:`.producer_client`), one module per client library
(:mod:`.native`, the compiled extension over librdkafka; :mod:`.confluent`, confluent-kafka's producer), and
:func:`open_producer`, which picks one by ``writeEngine`` in that order of preference."""

from __future__ import annotations

from collections.abc import Mapping

from spark_kafka_eos.config.engine import Engine
from spark_kafka_eos.write.producers.confluent import ConfluentProducer
from spark_kafka_eos.write.producers.native import open_native_producer
from spark_kafka_eos.write.producers.producer_client import ProducerClient


def open_producer(config: Mapping[str, object], engine: Engine) -> ProducerClient:
    """A producer of ``config`` (a task's producer configuration): the compiled one unless ``engine`` is python
    (``auto``: where it is installed and can run the configuration; ``native``: or an error), else
    confluent-kafka's."""
    client: ProducerClient | None = None if engine == "python" else open_native_producer(config, required=engine == "native")
    return client if client is not None else ConfluentProducer(config)
