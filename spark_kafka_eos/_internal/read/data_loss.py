"""One place that decides what lost offsets mean: ``failOnDataLoss``.

Every case where a partition's offsets are no longer where the query stands (records deleted by
retention, a topic or partition deleted, a topic re-created, a log truncated below the position)
goes through :func:`report_data_loss`: a loud :class:`KafkaEosDataLossError` when
``failOnDataLoss`` is true (the default), a warning when it is false. Never silence.
"""

from __future__ import annotations

import logging

from spark_kafka_eos._internal.config.reader import PartitionKey
from spark_kafka_eos.errors import KafkaEosDataLossError

log = logging.getLogger(__name__)

FAIL_ON_DATA_LOSS = "failOnDataLoss"


def report_data_loss(problem: str, fail_on_data_loss: bool, when_skipped: str) -> None:
    """Raise for ``problem`` when ``fail_on_data_loss``; otherwise log it with ``when_skipped``
    (what the read does instead, e.g. "Reading on from offset 0")."""
    if fail_on_data_loss:
        raise KafkaEosDataLossError(
            f"{problem} Some data may have been lost. Set {FAIL_ON_DATA_LOSS}=false to go on anyway "
            f"({when_skipped[0].lower() + when_skipped[1:]}), after checking that this is expected."
        )
    log.warning("%s %s (%s=false).", problem, when_skipped, FAIL_ON_DATA_LOSS)


def describe(tp: PartitionKey) -> str:
    """``topic-partition``, as Kafka's tools write it."""
    return f"{tp[0]}-{tp[1]}"


def moved_back_problem(tp: PartitionKey, position: int, end: int, end_is: str = "the partition's log now ends at") -> str:
    """The message for a partition whose offsets moved below the query's position."""
    return (
        f"{describe(tp)} (topic {tp[0]}, partition {tp[1]}): the query stands at offset {position}, but "
        f"{end_is} offset {end}. The topic was deleted and re-created, re-created with other partitions, "
        "or its log was truncated (unclean leader election); a given offset may also lie past its end."
    )
