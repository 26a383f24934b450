"""Where librdkafka's own log lines go, from either client: Python logging, under ``spark_kafka_eos.librdkafka``, at
the levels confluent-kafka maps librdkafka's syslog levels to."""

from __future__ import annotations

import logging

LIBRDKAFKA_LOGGER = logging.getLogger("spark_kafka_eos.librdkafka")
SYSLOG_LEVELS = {0: logging.CRITICAL, 1: logging.CRITICAL, 2: logging.CRITICAL, 3: logging.ERROR, 4: logging.WARNING, 5: logging.INFO,
                 6: logging.INFO}
"""librdkafka's syslog levels, as confluent-kafka maps them for its ``logger``; 7 (debug) and above are DEBUG."""


def log_librdkafka_line(level: int, facility: str, client: str, line: str) -> None:
    """One line of librdkafka's (syslog level, facility, client name, line), as confluent-kafka's ``logger`` logs it."""
    LIBRDKAFKA_LOGGER.log(SYSLOG_LEVELS.get(level, logging.DEBUG), "%s [%s] %s", facility, client, line)
