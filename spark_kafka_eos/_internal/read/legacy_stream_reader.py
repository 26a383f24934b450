"""The stream reader for Spark 4.0 and 4.1, whose engine asks a Python source for its latest offset
without the trigger's start, read limit or trigger kind.

The start is the end of the last micro-batch Spark planned: Spark plans every batch it asks an end
for (``partitions``), and on a restart it plans the checkpoint's last end once before asking
(``setLatestSeenOffset``); a new query starts at ``initialOffset``.

``maxOffsetsPerTrigger`` cannot be honoured here: Spark 4.0 and 4.1 ask a Python source once under
Trigger.AvailableNow, in the same way as at any other trigger, so a limited answer would end an
AvailableNow run after its first micro-batch with the rest unread. The option is refused.
``minOffsetsPerTrigger`` is honoured: the first trigger of a run never waits, and it is the only one of an
AvailableNow run.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql.datasource import InputPartition

from spark_kafka_eos._internal.config.reader import ReaderOptions
from spark_kafka_eos._internal.read.offset_lookup import GroupGuard
from spark_kafka_eos._internal.read.reader import StreamOffset, StreamReaderCore
from spark_kafka_eos.errors import KafkaEosOptionError


class KafkaEosLegacyStreamReader(StreamReaderCore):
    """``spark.readStream.format("kafka_eos")`` on Spark 4.0 and 4.1."""

    _planned_end: StreamOffset | None = None

    def __init__(self, options: ReaderOptions, group_guard: GroupGuard | None = None) -> None:
        if options.max_offsets_per_trigger is not None:
            import pyspark

            raise KafkaEosOptionError(
                "maxOffsetsPerTrigger",
                f"needs Spark 4.2 or later; this is Spark {pyspark.__version__}, whose engine does not tell a Python "
                "source the trigger's start or kind, so a limit would end a Trigger.AvailableNow run after its first "
                "micro-batch with the rest unread.",
                "leave maxOffsetsPerTrigger out (each micro-batch reads up to the last stable offset at its start; "
                "minOffsetsPerTrigger and maxTriggerDelay work), or run on Spark 4.2+ (Databricks Runtime 19+).",
            )
        super().__init__(options, group_guard)

    def latestOffset(self) -> StreamOffset:  # type: ignore[override]  # Spark 4.0/4.1 call it without arguments
        if self._planned_end is not None:
            return self._next_end(self._planned_end, None, self.options.min_offsets_per_trigger)
        # Nothing planned yet in this run: a new query, or a restart whose first question comes before
        # the checkpoint's position (Spark's AvailableNow wrapper asks for its target first). The initial
        # offset stands in for the start; it is no position to report to progressGroup.
        return self._next_end(self.initialOffset(), None, self.options.min_offsets_per_trigger, progress=False)

    def partitions(self, start: StreamOffset, end: StreamOffset) -> Sequence[InputPartition]:
        self._planned_end = end
        return super().partitions(start, end)
