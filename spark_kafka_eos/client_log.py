"""librdkafka's log lines go to Python logging, not to stderr.

Every Kafka client the package opens is configured with :func:`to_python_logging`. librdkafka's
levels map to Python's (3 error -> ERROR, 4 warning -> WARNING, 6 info -> INFO, 7 debug -> DEBUG),
under the logger ``spark_kafka_eos.librdkafka``; lines come out when the client is polled, so an
idle client (one kept for the next micro-batch while a broker restarts) prints nothing.
"""

from __future__ import annotations

import logging
from typing import Mapping

LIBRDKAFKA_LOGGER = logging.getLogger("spark_kafka_eos.librdkafka")


def to_python_logging(config: Mapping[str, object]) -> dict[str, object]:
    """``config`` with librdkafka's logs sent to :data:`LIBRDKAFKA_LOGGER`."""
    return {**config, "logger": LIBRDKAFKA_LOGGER}
