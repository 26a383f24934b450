"""The stream reader for Spark 4.2 and later, whose engine passes each trigger's start offset and read
limit to Python sources (admission control) and asks them for Trigger.AvailableNow's target."""

from __future__ import annotations

import logging

from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from spark_kafka_eos._internal.read.reader import StreamOffset, StreamReaderCore, to_stream_offset

log = logging.getLogger(__name__)


class KafkaEosStreamReader(StreamReaderCore, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafka_eos")`` on Spark 4.2+: maxOffsetsPerTrigger and
    minOffsetsPerTrigger as the engine's read limits; Trigger.AvailableNow ends at the LSO taken at
    its start, in micro-batches."""

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        def target() -> dict[tuple[str, int], int]:
            return self.lookup.latest(self.lookup.partitions(self.options.subscription, must_exist=False))

        self._available_now_target = self._planned("Trigger.AvailableNow target", target)

    def latestOffset(self, start: StreamOffset, limit: ReadLimit) -> StreamOffset:
        max_rows, min_rows = self._limits(limit)
        return self._next_end(start, max_rows, min_rows)

    def _limits(self, limit: ReadLimit) -> tuple[int | None, int | None]:
        """(max, min) offsets for this batch. The engine passes one limit; the other configured
        bound applies too unless the engine asks for everything. Under Trigger.AvailableNow the
        minimum never applies: the engine passes the default limit there, and waiting for more
        would end the run with records below the minimum left unread."""
        max_rows: int | None
        min_rows: int | None
        if isinstance(limit, ReadMaxRows):
            max_rows, min_rows = limit.max_rows, self.options.min_offsets_per_trigger
        elif isinstance(limit, ReadMinRows):
            max_rows, min_rows = self.options.max_offsets_per_trigger, limit.min_rows
        else:
            if not isinstance(limit, ReadAllAvailable):
                log.warning("kafka_eos ignores the read limit %r: Kafka offsets are neither files nor bytes", limit)
            return None, None
        return max_rows, None if self._available_now_target is not None else min_rows

    def reportLatestOffset(self) -> StreamOffset | None:
        """Where each partition's log ends (its high watermark), so that the lag Spark's progress shows includes the
        records an open transaction holds back above the last stable offset, which the stream cannot read yet."""
        return to_stream_offset(self._log_end) if self._log_end is not None else None
