"""Starting a librdkafka transactional producer without librdkafka's start-up waits.

librdkafka asks for the producer id at once; when no broker connection is up yet, it tries again only
after a fixed 500 ms, so ``init_transactions`` takes either ~20 ms or ~510 ms. Two metadata requests for the
topic the producer will write to come first: librdkafka may answer the first over the bootstrap connection,
which it does not use for the producer id, and the second returns once the connection to the broker that
metadata named is up. That connection is itself held back by ``reconnect.backoff.ms``, which the package's
clients start at 10 ms (:func:`spark_kafka_eos._internal.config.librdkafka.for_librdkafka`). ``make bench-commit``
shows the start's time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException, Producer

from spark_kafka_eos._internal.config.librdkafka import for_librdkafka
from spark_kafka_eos._internal.txn.bounded_call import bounded

WARM_UP_TIMEOUT_S = 2.0
"""How long the metadata warm-up may take. It is an optimisation only: on a timeout or an error
(authentication, authorization) ``init_transactions`` goes on and reports the cause as before."""


def start_transactional_producer(config: Mapping[str, Any], topic: str, timeout_s: float,
                                 before_init: Callable[[], None] | None = None) -> Producer:
    """A producer of ``config`` (which names its ``transactional.id``) whose transactions are initialised:
    InitProducerId fenced any earlier holder of the id. ``before_init`` runs right before that (after the
    warm-up) and may raise to stop it. Raises ``KafkaException`` as ``init_transactions`` does (an
    :class:`~spark_kafka_eos._internal.txn.bounded_call.AbandonedCallError` if it does not return)."""
    producer = warmed_up_producer(config, topic, timeout_s)
    if before_init is not None:
        before_init()
    bounded(lambda: producer.init_transactions(timeout_s), timeout_s, "init_transactions")
    return producer


def warmed_up_producer(config: Mapping[str, Any], topic: str, timeout_s: float) -> Producer:
    """A producer of ``config`` with its broker connection up, its transactions not initialised yet: nothing on
    the broker has changed (no InitProducerId)."""
    producer = Producer(for_librdkafka(config))
    try:
        for _ in range(2):
            producer.list_topics(topic, timeout=min(WARM_UP_TIMEOUT_S, timeout_s))
    except KafkaException:
        pass
    return producer
