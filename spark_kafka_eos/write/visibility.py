"""Is a participant's output visible to a read_committed reader? The last word before data loss is reported."""

from __future__ import annotations

from spark_kafka_eos.read.reader_options import Subscription, internal_read_options
from spark_kafka_eos.read.partition_reader import read_offset_range
from spark_kafka_eos.read.planner import OffsetRange
from spark_kafka_eos.write.log_record import Position
from spark_kafka_eos.write.writer_options import WriterOptions


def committed_record_at(options: WriterOptions, position: Position) -> bool:
    """True if a read_committed reader returns the record at ``position``: the transaction that wrote
    it committed. False if it is filtered out (aborted) or gone."""
    topic, partition, offset = position
    reader_options = internal_read_options(options.connection, Subscription("assign", partitions=((topic, partition),)),
                                           fail_on_data_loss=False)
    for batch in read_offset_range(reader_options, OffsetRange(topic, partition, offset, offset + 1)):
        if offset in batch.column("offset").to_pylist():
            return True
    return False
