"""What the range reader asks of a consumer, so that one set of range rules drives either data path.

A fetcher holds one assigned partition. Each :meth:`RangeFetcher.step` takes the records
librdkafka delivers into Arrow batches until it meets an error event (which it returns, so the
reader decides) or a record at or past the range end. Two fetchers implement it: the pure-Python
one over confluent-kafka (:mod:`~spark_kafka_eos._internal.read.fetchers.confluent`) and the compiled one
(:mod:`~spark_kafka_eos._internal.read.fetchers.native`, from the optional ``spark-kafka-eos-native`` wheel).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa


@dataclass(frozen=True)
class FetchError:
    """An error event of the consumer: librdkafka's code (:class:`~spark_kafka_eos._internal.client_errors.KafkaErrorCode`)."""

    code: int
    reason: str
    offset: int | None
    fatal: bool


@dataclass(frozen=True)
class FetchStep:
    """What one step took: the offset of its last record, whether it met a record at or past the
    range end (the rest of that fetch is dropped), and the error event it stopped at."""

    last_offset: int | None
    past_end: bool
    error: FetchError | None


class RangeFetcher(Protocol):
    """A consumer of one partition that builds record batches of Spark's Kafka schema. A failing call (assign,
    position, watermarks) raises :class:`~spark_kafka_eos._internal.client_errors.ClientCallError`."""

    reused: bool
    """Whether its client was kept from an earlier read (:mod:`~spark_kafka_eos._internal.read.idle_consumers`)."""
    key: Hashable | None
    """What it is kept by (None: never kept)."""

    def assign(self, offset: int) -> None:
        """Fetch from ``offset`` on (again, after an offset reset stopped the fetcher)."""

    def step(self, max_records: int, timeout_s: float, end: int) -> FetchStep:
        """Take up to ``max_records`` delivered records, waiting at most ``timeout_s`` for them."""

    def pending(self) -> int:
        """Messages delivered by librdkafka (so past its position) that a step has not looked at yet."""

    def batches(self, flush: bool) -> list[pa.RecordBatch]:
        """The full batches (``maxRecordsPerBatch``/``maxBytesPerBatch``), and with ``flush`` the partial one."""

    def position(self) -> int:
        """librdkafka's consume position: past delivered records, markers and aborted records."""

    def watermarks(self, timeout_s: float) -> tuple[int, int]:
        """The partition's low watermark and, read_committed, its last stable offset (the end of what the range can
        read; the high watermark only where no transaction is open), from its leader."""

    def close(self) -> None:
        """Leave the partition and free the client."""

    def release(self) -> None:
        """Leave the partition, drop what it delivered and keep the client for the next range read in this
        process (:mod:`~spark_kafka_eos._internal.read.idle_consumers`); only after a read that ended cleanly."""
