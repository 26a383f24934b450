"""What Spark allows a Python data source at most, with no Kafka at all: a source that yields pre-built Arrow
batches of the Kafka schema (batch and stream), and a stream sink that counts its Arrow batches and drops them.
The benchmarks show every figure against these ceilings too. They keep their Python workers' heaps out of pyspark's
collection after each call as kafka_eos does (:mod:`spark_kafka_eos._internal.worker_gc`, at the same calls): what any Python
data source can do, so not counted as kafka_eos's own gain."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

try:  # Spark 4.2+: the engine passes admission control to Python sources (Trigger.AvailableNow in micro-batches)
    from pyspark.sql.datasource import DataSourceStreamReader
    from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - older Sparks: the stream ceiling is not offered
    SupportsTriggerAvailableNow = None  # type: ignore[assignment,misc]

from spark_kafka_eos._internal.schema import arrow_record_schema, record_schema
from spark_kafka_eos._internal.worker_gc import freeze_driver_call_heap, freeze_worker_heap

CEILING_SOURCE = "bench_arrow_ceiling"
CEILING_SINK = "bench_discarding_sink"
CEILING_STREAM_SOURCE = "bench_stream_ceiling"
_BATCH_ROWS = 10_000


class ArrowCeilingSource(DataSource):
    """Options: ``rows`` (in all), ``partitions``, ``valueBytes``."""

    @classmethod
    def name(cls) -> str:
        return CEILING_SOURCE

    def schema(self) -> StructType:
        freeze_driver_call_heap(True)
        return record_schema(False)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _CeilingReader(int(self.options["rows"]), int(self.options.get("partitions", "2")), int(self.options.get("valueBytes", "100")))


class _CeilingReader(DataSourceReader):
    def __init__(self, rows: int, partitions: int, value_bytes: int) -> None:
        self._rows, self._partitions, self._value_bytes = rows, partitions, value_bytes

    def partitions(self) -> list[InputPartition]:
        share, rest = divmod(self._rows, self._partitions)
        freeze_driver_call_heap(True)
        return [InputPartition((p, share + (1 if p < rest else 0))) for p in range(self._partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        freeze_worker_heap(True)
        number, rows = partition.value
        batch = _batch(number, min(rows, _BATCH_ROWS), self._value_bytes)
        for start in range(0, rows, _BATCH_ROWS):
            yield batch.slice(0, min(_BATCH_ROWS, rows - start))


class StreamCeilingSource(DataSource):
    """A stream of ``batches`` micro-batches of ``rowsPerBatch`` pre-built rows each, in ``partitions`` Spark
    partitions: the least a micro-batch of a Python source into a Python sink costs in Spark."""

    @classmethod
    def name(cls) -> str:
        return CEILING_STREAM_SOURCE

    def schema(self) -> StructType:
        freeze_driver_call_heap(True)
        return record_schema(False)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if SupportsTriggerAvailableNow is None:
            raise RuntimeError(f"{CEILING_STREAM_SOURCE} needs Spark 4.2 or later (admission control for Python sources)")
        return _StreamCeilingReader(int(self.options["rowsPerBatch"]), int(self.options["batches"]),
                                    int(self.options.get("partitions", "1")))


if SupportsTriggerAvailableNow is not None:
    class _StreamCeilingReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        """Offsets count micro-batches; each latestOffset admits one more, up to ``batches``."""

        def __init__(self, rows_per_batch: int, batches: int, partitions: int) -> None:
            self._rows, self._batches, self._partitions = rows_per_batch, batches, partitions

        def initialOffset(self) -> dict[str, int]:
            return {"batch": 0}

        def prepareForTriggerAvailableNow(self) -> None:
            pass

        def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
            return {"batch": min(start["batch"] + 1, self._batches)}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            share, rest = divmod(self._rows * (end["batch"] - start["batch"]), self._partitions)
            return [InputPartition((p, share + (1 if p < rest else 0))) for p in range(self._partitions)]

        def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
            freeze_worker_heap(True)
            number, rows = partition.value
            if rows:
                yield _batch(number, rows, 100)


def _batch(partition: int, rows: int, value_bytes: int) -> pa.RecordBatch:
    columns = [
        pa.array([str(i).encode() for i in range(rows)], pa.binary()),
        pa.array([b"v" * value_bytes] * rows, pa.binary()),
        pa.array(["ceiling"] * rows, pa.string()),
        pa.array([partition] * rows, pa.int32()),
        pa.array(range(rows), pa.int64()),
        pa.array([1_700_000_000_000_000] * rows, pa.timestamp("us", tz="UTC")),
        pa.array([0] * rows, pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_record_schema(False))


class DiscardingSink(DataSource):
    """A sink that drops what it gets; each micro-batch (or batch write) adds its row count to the file ``countFile``."""

    @classmethod
    def name(cls) -> str:
        return CEILING_SINK

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        freeze_driver_call_heap(True)
        return _DiscardingWriter(Path(self.options["countFile"]))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        freeze_driver_call_heap(True)
        return _DiscardingBatchWriter(Path(self.options["countFile"]))


@dataclass
class _Rows(WriterCommitMessage):
    rows: int


class _DiscardingWriter(DataSourceStreamArrowWriter):
    def __init__(self, count_file: Path) -> None:
        self._count_file = count_file

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Rows:
        freeze_worker_heap(True)
        return _Rows(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        before = int(self._count_file.read_text()) if self._count_file.exists() else 0
        self._count_file.write_text(str(before + sum(m.rows for m in messages if isinstance(m, _Rows))))
        freeze_driver_call_heap(True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        freeze_driver_call_heap(True)


class _DiscardingBatchWriter(DataSourceArrowWriter):
    def __init__(self, count_file: Path) -> None:
        self._stream = _DiscardingWriter(count_file)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Rows:
        return self._stream.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._stream.commit(messages, 0)
