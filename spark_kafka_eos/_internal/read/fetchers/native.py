"""The compiled :class:`~spark_kafka_eos._internal.read.fetchers.range_fetcher.RangeFetcher`, from the optional
``spark-kafka-eos-native`` wheel: Rust builds Arrow arrays from librdkafka's messages, with no Python object per
record, and hands them over through Arrow's C data interface (no copy).

It takes the same librdkafka settings as the pure-Python consumer. With ``readEngine=auto`` (the
default), a configuration it cannot run (a Python callback such as AWS MSK IAM's token signer, or a
SASL mechanism it is built without, such as GSSAPI) or a missing wheel makes
:func:`open_native_fetcher` return None, and the read takes the pure-Python path; with
``readEngine=native`` either is an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping
from types import ModuleType
from typing import Any

import pyarrow as pa

from spark_kafka_eos._internal.native.clients import forward_logs, open_compiled, raise_compiled_error
from spark_kafka_eos._internal.read.fetchers.range_fetcher import FetchError, FetchStep
from spark_kafka_eos._internal.read.idle_consumers import IDLE_CONSUMERS, consumer_key
from spark_kafka_eos._internal.read.record_batch import ConstantColumns, timestamp_out_of_range, unparsable_headers
from spark_kafka_eos._internal.schema import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE, arrow_record_schema

log = logging.getLogger(__name__)


def open_native_fetcher(
    config: Mapping[str, Any], topic: str, partition: int, include_headers: bool, max_records: int, max_bytes: int,
    on_statistics: Callable[[str], None], required: bool, fresh: bool = False,
) -> NativeFetcher | None:
    """A compiled fetcher for ``config`` (what :func:`for_librdkafka` made), on an idle consumer kept from an earlier
    read unless ``fresh``; None where it cannot run it, unless ``required`` (``readEngine=native``), which makes that
    an error."""
    def make(native: ModuleType, settings: list[tuple[str, str]]) -> Any:
        return native.RangeConsumer(
            settings, topic, partition, include_headers, max_records, max_bytes, (CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE)
        )

    key = consumer_key("native", config, include_headers, max_records, max_bytes)
    consumer = None if fresh else IDLE_CONSUMERS.take(key)
    reused = consumer is not None
    if consumer is not None:
        consumer.retarget(topic, partition)
    else:
        consumer = open_compiled(config, make, "readEngine", "read", required)
        if consumer is None:
            return None
    return NativeFetcher(consumer, topic, partition, include_headers, on_statistics, key, reused)


class NativeFetcher:
    """Reads one partition with the compiled consumer; its statistics and logs reach Python after each call."""

    def __init__(
        self, consumer: Any, topic: str, partition: int, include_headers: bool, on_statistics: Callable[[str], None],
        key: Hashable | None = None, reused: bool = False,
    ) -> None:
        self._consumer = consumer
        self._schema = arrow_record_schema(include_headers)
        self._constant = ConstantColumns(topic, partition)
        self._on_statistics = on_statistics
        self._key = key
        self.key = key
        self.reused = reused

    def assign(self, offset: int) -> None:
        raise_compiled_error(self._consumer.assign(offset))

    def step(self, max_records: int, timeout_s: float, end: int) -> FetchStep:
        try:
            last_offset, past_end, error = self._consumer.step(max_records, int(timeout_s * 1000), end)
        except OverflowError as overflow:
            offset, timestamp_ms = overflow.args
            raise timestamp_out_of_range(self._constant.topic, self._constant.partition, offset, timestamp_ms) from None
        except ValueError as bad:
            if len(bad.args) != 3 or bad.args[0] != "headers":
                raise
            _, offset, reason = bad.args
            raise unparsable_headers(self._constant.topic, self._constant.partition, offset, reason) from None
        finally:
            self._hand_over_callbacks()
        if error is None:
            return FetchStep(last_offset, past_end, None)
        code, reason, offset, fatal = error
        return FetchStep(last_offset, past_end, FetchError(code, reason, offset if offset >= 0 else None, fatal))

    def pending(self) -> int:
        pending: int = self._consumer.pending()
        return pending

    def batches(self, flush: bool) -> list[pa.RecordBatch]:
        return [self._record_batch(pa.record_batch(exported)) for exported in self._consumer.take_batches(flush)]

    def position(self) -> int:
        err, offset = self._consumer.position()
        raise_compiled_error(err)
        return int(offset)

    def watermarks(self, timeout_s: float) -> tuple[int, int]:
        err, low, high = self._consumer.watermarks(int(timeout_s * 1000))
        raise_compiled_error(err)
        return low, high

    def close(self) -> None:
        forward_logs(self._consumer.close())

    def release(self) -> None:
        if self._key is None or self._consumer.release():
            self.close()
            return
        self._consumer.take_statistics()  # the old partition's: the next range's reader must not see them
        forward_logs(self._consumer.take_logs())
        IDLE_CONSUMERS.keep(self._key, self._consumer, lambda consumer: forward_logs(consumer.close()))

    def _hand_over_callbacks(self) -> None:
        statistics = self._consumer.take_statistics()
        if statistics is not None:
            self._on_statistics(statistics)
        forward_logs(self._consumer.take_logs())

    def _record_batch(self, built: pa.RecordBatch) -> pa.RecordBatch:
        """Spark's Kafka schema from a batch the compiled consumer built (key, value, offset, timestamp,
        timestampType, and headers when asked for), with the constant topic and partition columns; no buffer is copied."""
        key, value, offset, timestamp, timestamp_type = built.columns[:5]
        columns = [key, value, *self._constant.for_rows(built.num_rows), offset, timestamp, timestamp_type]
        if built.num_columns > 5:
            columns.append(_headers(self._schema.field("headers").type, built.column(5)))
        return pa.RecordBatch.from_arrays(columns, schema=self._schema)


def _headers(list_type: pa.ListType, built: pa.Array) -> pa.Array:
    """The headers column as Spark's type: its names, built as binary, viewed as strings once checked."""
    headers = built.view(list_type)
    # Header names are UTF-8 strings in Spark's schema; the broker does not check that.
    headers.values.field(0).validate(full=True)
    return headers
