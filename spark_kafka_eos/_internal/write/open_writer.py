"""Opening ``kafka_eos``'s writers on the driver: validate the options and the input schema, fence other drivers
of the prefix and roll its last decision forward before any task, and pick Spark's writer class for this Spark
version (:mod:`~spark_kafka_eos._internal.write.arrow_stream_writer` on 4.1+, :mod:`~spark_kafka_eos._internal.write.legacy_stream_writer`
on 4.0)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from pyspark.sql.datasource import DataSourceStreamWriter
from pyspark.sql.types import StructType

from spark_kafka_eos._internal.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log.records import EpochId
from spark_kafka_eos._internal.spark_support import has_arrow_stream_writers
from spark_kafka_eos._internal.worker_gc import freeze_driver_call_heap
from spark_kafka_eos._internal.write.broker_support import require_transaction_admin_apis
from spark_kafka_eos._internal.write.consumer_group import check_group_has_no_members
from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
from spark_kafka_eos._internal.write.hooks import NO_HOOKS, WriterHooks
from spark_kafka_eos._internal.write.input_schema import InputColumns, validate_input_schema
from spark_kafka_eos._internal.write.legacy_stream_writer import KafkaEosLegacyStreamWriter
from spark_kafka_eos._internal.write.ownership import Verdict
from spark_kafka_eos._internal.write.transaction_timeout import resolve_transaction_timeout_ms
from spark_kafka_eos._internal.write.writer import KafkaEosBatchWriter

log = logging.getLogger(__name__)


def open_stream_writer(raw_options: Mapping[str, str], schema: StructType, hooks: WriterHooks = NO_HOOKS) -> DataSourceStreamWriter:
    """Validate on the driver, then fence other drivers of the prefix and roll its last decision
    forward, before any task of the query runs."""
    options, columns, timeout_ms, coordinator = _validated(raw_options, schema, True, hooks)
    coordinator.prepare()
    writer: DataSourceStreamWriter
    if has_arrow_stream_writers():
        # Imported only where it exists: Spark 4.0 has no DataSourceStreamArrowWriter.
        from spark_kafka_eos._internal.write.arrow_stream_writer import KafkaEosStreamWriter

        writer = KafkaEosStreamWriter(options, columns, timeout_ms, hooks)
    else:
        writer = KafkaEosLegacyStreamWriter(options, columns, timeout_ms, hooks)
    freeze_driver_call_heap(options.gc_freeze)
    return writer


def open_batch_writer(raw_options: Mapping[str, str], schema: StructType, hooks: WriterHooks = NO_HOOKS) -> KafkaEosBatchWriter:
    """As :func:`open_stream_writer`, and the job is judged here too: refused up front if the prefix is
    owned by a stream, and a no-op if its ``writeId`` is already committed."""
    options, columns, timeout_ms, coordinator = _validated(raw_options, schema, False, hooks)
    epoch = EpochId.batch(options.write_id or uuid.uuid4().hex)
    already_committed = coordinator.prepare(epoch).verdict == Verdict.REPLAY
    if already_committed:
        log.warning("writeId %s of prefix %s is already committed: this run writes nothing", epoch.run_id, options.prefix)
    freeze_driver_call_heap(options.gc_freeze)
    return KafkaEosBatchWriter(options, columns, timeout_ms, hooks, epoch, already_committed)


def _validated(raw_options: Mapping[str, str], schema: StructType, streaming: bool,
               hooks: WriterHooks) -> tuple[WriterOptions, InputColumns, int, TwoPhaseCommitCoordinator]:
    options = parse_writer_options(raw_options, streaming=streaming)
    columns = validate_input_schema(schema, options, streaming)
    timeout_ms = resolve_transaction_timeout_ms(options)
    require_transaction_admin_apis(options.connection, options.bootstrap_servers)
    check_group_has_no_members(options)
    return options, columns, timeout_ms, TwoPhaseCommitCoordinator(options, timeout_ms, hooks)
