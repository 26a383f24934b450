"""Starting a librdkafka transactional producer without librdkafka's start-up waits.

Measured on loopback (``tests/benchmarks/bench_commit.py``): a new producer's ``init_transactions``
took either ~20 ms or ~510 ms, at random. librdkafka asks for the producer id at once; when no broker
connection is up yet, it tries again only after a fixed 500 ms. A metadata request for the topic the
producer will write to connects first, so the producer id is asked for over a live connection. One
request is not enough: librdkafka may answer it over the bootstrap connection, which it does not use for
the producer id; the second returns once the connection to the broker that metadata named is up (measured,
each start right after the id's previous transaction: with one request 1 and 6 of 10 starts still waited
500 ms, in two runs; with two requests 0 of 24). That connection is itself held back by
``reconnect.backoff.ms`` (librdkafka's default 100 ms, jittered), which the package's clients start at 10 ms
(:func:`spark_kafka_eos.librdkafka_config.for_librdkafka`). Together a start takes ~20 ms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException, Producer

from spark_kafka_eos.librdkafka_config import for_librdkafka

WARM_UP_TIMEOUT_S = 2.0
"""How long the metadata warm-up may take. It is an optimisation only: on a timeout or an error
(authentication, authorization) ``init_transactions`` goes on and reports the cause as before."""


def start_transactional_producer(config: Mapping[str, Any], topic: str, timeout_s: float,
                                 before_init: Callable[[], None] | None = None) -> Producer:
    """A producer of ``config`` (which names its ``transactional.id``) whose transactions are initialised:
    InitProducerId fenced any earlier holder of the id. ``before_init`` runs right before that (after the
    warm-up) and may raise to stop it. Raises ``KafkaException`` as ``init_transactions`` does."""
    producer = Producer(for_librdkafka(config))
    try:
        for _ in range(2):
            producer.list_topics(topic, timeout=min(WARM_UP_TIMEOUT_S, timeout_s))
    except KafkaException:
        pass
    if before_init is not None:
        before_init()
    producer.init_transactions(timeout_s)
    return producer
