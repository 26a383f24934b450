"""A source partition held back by an open transaction shows: a read_committed stream reads up to the last stable
offset (LSO), and a transaction left open there (a producer that died without ending it waits out its
``transaction.timeout.ms``; a hanging transaction never ends) stops the partition in silence, with no lag to the LSO.

:class:`StuckPartitionWatch` remembers since when each partition's LSO stands where it is; once it has stood
``stuckPartitionWarning`` while the partition's log holds records above it, it warns once, naming the
transaction's start offset (the LSO is the first offset of the partition's oldest open transaction), its producer
(DescribeProducers, where the principal may ask) and the ``kafka-transactions.sh`` commands.
"""

from __future__ import annotations

import logging
import time

from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.config.reader import PartitionKey
from spark_kafka_eos._internal.read.data_loss import describe

log = logging.getLogger(__name__)

Offsets = dict[PartitionKey, int]


class StuckPartitionWatch:
    """Warns about partitions whose LSO stands still while records sit above it (see the module's docstring)."""

    def __init__(self, connection: KafkaConnection, warn_after_ms: int) -> None:
        self._connection = connection
        self._warn_after_s = warn_after_ms / 1000.0
        self._since: dict[PartitionKey, tuple[int, float]] = {}
        self._warned: set[tuple[PartitionKey, int]] = set()

    def observe(self, stable: Offsets, log_end: Offsets) -> list[PartitionKey]:
        """Note the LSOs and log ends of a plan; warn about (and return) the partitions stuck for the first time."""
        if self._warn_after_s <= 0:
            return []
        now = time.monotonic()
        due = []
        for tp, lso in stable.items():
            seen = self._since.get(tp)
            if seen is None or seen[0] != lso:
                self._since[tp] = (lso, now)
            elif now - seen[1] >= self._warn_after_s and (tp, lso) not in self._warned:
                due.append(tp)
        stuck = [tp for tp in due if log_end.get(tp, 0) > stable[tp]]
        for tp in stuck:
            self._warned.add((tp, stable[tp]))
            log.warning("%s", self._message(tp, stable[tp], log_end[tp], now - self._since[tp][1]))
        return stuck

    def _message(self, tp: PartitionKey, lso: int, end: int, stood_s: float) -> str:
        servers = self._connection.bootstrap_servers
        producer = producer_at(self._connection, tp, lso)
        who = f" by producer {producer}" if producer else ""
        return (
            f"kafka_eos: {describe(tp)} has not moved past offset {lso} for {stood_s:.0f}s while its log holds records up "
            f"to offset {end}: a transaction opened at offset {lso}{who} is still open, and a read_committed stream "
            "reads nothing of the partition past it until it ends (a producer that died waits out its "
            "transaction.timeout.ms; a hanging transaction never ends). See it: kafka-transactions.sh --bootstrap-server "
            f"{servers} describe-producers --topic {tp[0]} --partition {tp[1]}. If it hangs, abort it: "
            f"kafka-transactions.sh --bootstrap-server {servers} abort --topic {tp[0]} --partition {tp[1]} "
            f"--start-offset {lso}. (stuckPartitionWarning sets how long before this warning.)"
        )


def producer_at(connection: KafkaConnection, tp: PartitionKey, start_offset: int) -> str | None:
    """``<producer id> (epoch <epoch>)`` of the transaction open at ``start_offset`` (DescribeProducers), or None where
    it cannot be told (no ACL to describe it, an older broker): the warning names the command instead."""
    try:
        from kafka import KafkaAdminClient, TopicPartition  # only when a warning is due: kafka-python's import is slow

        from spark_kafka_eos._internal.config.kafka_python import translate

        settings = {**translate(connection.client_config()), "bootstrap_servers": connection.bootstrap_servers}
        admin = KafkaAdminClient(**settings)
        try:
            states = admin.describe_producers([TopicPartition(tp[0], tp[1])])
        finally:
            admin.close()
    except Exception as err:  # noqa: BLE001 - the warning stands without it
        log.debug("DescribeProducers of %s failed: %s", describe(tp), err)
        return None
    for state in states.values():
        for producer in state.active_producers:
            if producer.current_transaction_start_offset == start_offset:
                return f"{producer.producer_id} (epoch {producer.producer_epoch})"
    return None
