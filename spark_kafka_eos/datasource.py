"""``KafkaEosDataSource``: the ``kafka_eos`` Python data source. Name, schema and factories only."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from spark_kafka_eos._internal.config.options import GC_FREEZE, boolean_option, options_help
from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.reader import KafkaEosBatchReader
from spark_kafka_eos._internal.schema import record_schema
from spark_kafka_eos._internal.spark_support import has_read_limits
from spark_kafka_eos._internal.worker_gc import freeze_driver_call_heap
from spark_kafka_eos._internal.write.coordinator import settle_group
from spark_kafka_eos._internal.write.hooks import NO_HOOKS, WriterHooks
from spark_kafka_eos._internal.write.open_writer import open_batch_writer, open_stream_writer
from spark_kafka_eos.errors import KafkaEosOptionError

__all__ = ["KafkaEosDataSource"]

class KafkaEosDataSource(DataSource):
    """Exactly-once Kafka for Spark: ``format("kafka_eos")`` with the options of Spark's Kafka source
    and sink. Reads are read_committed and bounded by the last stable offset; each write epoch (a
    micro-batch, or a whole ``df.write``) is one two-phase commit coordinated by the driver.

    Reading (``spark.read`` / ``spark.readStream``), the schema of Spark's Kafka source::

        spark.readStream.format("kafka_eos")
            .option("kafka.bootstrap.servers", "broker:9092").option("subscribe", "orders").load()

    Writing (``df.write`` / ``df.writeStream``), the columns of Spark's Kafka sink (``value``; ``key``,
    ``topic``, ``partition``, ``headers`` optional)::

        df.writeStream.format("kafka_eos").option("kafka.bootstrap.servers", "broker:9092")
            .option("topic", "out").option("checkpointLocation", "/chk/etl").start()

    ``kafka.bootstrap.servers`` is required. ``kafka.*`` settings pass to librdkafka (security, SASL, TLS,
    tuning), except those that would break the guarantees. Bad options fail before any data moves, with an error
    naming the option and the fix (:mod:`spark_kafka_eos.errors`). The README has every option's full meaning;
    each one, with its default:
    """

    @classmethod
    def name(cls) -> str:
        return "kafka_eos"

    def schema(self) -> StructType:
        include_headers = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        schema = record_schema(include_headers)
        freeze_driver_call_heap(boolean_option({k.lower(): v for k, v in self.options.items()}, GC_FREEZE))
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaEosBatchReader(parse_reader_options(self.options, streaming=False), group_guard=settle_group)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_reader_options(self.options, streaming=True)
        if has_read_limits():
            from spark_kafka_eos._internal.read.admission_stream_reader import KafkaEosStreamReader

            return KafkaEosStreamReader(options, group_guard=settle_group)
        from spark_kafka_eos._internal.read.legacy_stream_reader import KafkaEosLegacyStreamReader

        return KafkaEosLegacyStreamReader(options, group_guard=settle_group)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise KafkaEosOptionError("mode", "is overwrite; a Kafka topic can only be appended to.", "use .mode('append').")
        return open_batch_writer(self.options, schema, hooks=self.writer_hooks())

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return open_stream_writer(self.options, schema, hooks=self.writer_hooks())

    def writer_hooks(self) -> WriterHooks:
        """Seams of the write path; none here (tests override this to inject faults)."""
        return NO_HOOKS


KafkaEosDataSource.__doc__ = (KafkaEosDataSource.__doc__ or "") + options_help()  # one declaration per option
