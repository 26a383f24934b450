"""Is a participant's output visible to a read_committed reader? The last word before data loss is reported."""

from __future__ import annotations

import hashlib
from typing import Optional, Union

from spark_kafka_eos.read.reader_options import Subscription, internal_read_options
from spark_kafka_eos.read.partition_reader import read_offset_range
from spark_kafka_eos.read.planner import OffsetRange
from spark_kafka_eos.write.log_record import Position
from spark_kafka_eos.write.writer_options import WriterOptions


def record_digest(key: Union[str, bytes, None], value: Union[str, bytes, None]) -> str:
    """What a participant's first record was, so that another record at its offset (the topic deleted and
    re-created since) is not taken for it."""
    def raw(part: Union[str, bytes, None]) -> bytes:
        return b"\xff" if part is None else part.encode() if isinstance(part, str) else b"\x00" + part
    return hashlib.sha256(raw(key) + b"|" + raw(value)).hexdigest()[:16]


def committed_record_at(options: WriterOptions, position: Position, digest: Optional[str] = None) -> bool:
    """True if a read_committed reader returns the record at ``position`` (and, given its ``digest``, it is
    that record): the transaction that wrote it committed. False if it is filtered out (aborted), gone, or
    another record."""
    topic, partition, offset = position
    reader_options = internal_read_options(options.connection, Subscription("assign", partitions=((topic, partition),)),
                                           fail_on_data_loss=False)
    for batch in read_offset_range(reader_options, OffsetRange(topic, partition, offset, offset + 1)):
        for row_offset, key, value in zip(*(batch.column(c).to_pylist() for c in ("offset", "key", "value"))):
            if row_offset == offset:
                return digest is None or record_digest(key, value) == digest
    return False
