"""The range reader's consumers: one protocol (:mod:`.range_fetcher`), one module per client library
(:mod:`.native`, the compiled extension over librdkafka; :mod:`.confluent`, confluent-kafka's consumer), and
:func:`open_fetcher`, which picks one by ``readEngine`` (:func:`~spark_kafka_eos._internal.native.engine.choose_client`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException

from spark_kafka_eos._internal.config.librdkafka import for_librdkafka
from spark_kafka_eos._internal.config.reader import ReaderOptions
from spark_kafka_eos._internal.native.engine import choose_client
from spark_kafka_eos._internal.read.fetchers.confluent import open_confluent_fetcher
from spark_kafka_eos._internal.read.fetchers.native import open_native_fetcher
from spark_kafka_eos._internal.read.fetchers.range_fetcher import RangeFetcher
from spark_kafka_eos._internal.read.planner import OffsetRange
from spark_kafka_eos._internal.read.progress import statistics_interval_ms
from spark_kafka_eos._internal.read.record_batch import RecordBatchBuilder
from spark_kafka_eos.errors import KafkaEosOptionError


def open_fetcher(
    options: ReaderOptions, offset_range: OffsetRange, on_statistics: Callable[[str], None], fresh: bool = False,
) -> RangeFetcher:
    """By ``readEngine``: the compiled fetcher (``auto``: where it is installed and can run the
    configuration), else the pure-Python one; on a consumer kept from an earlier read, unless ``fresh``."""
    topic, partition = offset_range.topic, offset_range.partition
    config = for_librdkafka({**options.consumer_config(), "statistics.interval.ms": statistics_interval_ms(options.poll_timeout_ms)})

    def open_python() -> RangeFetcher:
        builder = RecordBatchBuilder(topic, partition, options.include_headers, options.max_records_per_batch, options.max_bytes_per_batch)
        return open_confluent_fetcher(config, topic, partition, builder, on_statistics, _consumer, fresh=fresh)

    return choose_client(options.read_engine, lambda required: open_native_fetcher(
        config, topic, partition, options.include_headers, options.max_records_per_batch, options.max_bytes_per_batch,
        on_statistics, required=required, fresh=fresh), open_python)


def _consumer(config: dict[str, Any]) -> Consumer:
    """A consumer of ``config``; an option error if librdkafka rejects it."""
    try:
        return Consumer(config)
    except KafkaException as err:
        raise KafkaEosOptionError(
            "kafka.*", f"librdkafka rejected the consumer configuration: {err.args[0].str()}.", "fix or remove that kafka.* option."
        ) from None


def check_consumer_config(options: ReaderOptions) -> None:
    """Fail on the driver, before any task runs, if librdkafka rejects the configuration."""
    _consumer(for_librdkafka(options.consumer_config())).close()
