"""``KafkaEosDataSource``: the ``kafka_eos`` Python data source. Name, schema and factories only."""

from __future__ import annotations

from typing import Union

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from spark_kafka_eos.errors import KafkaEosOptionError
from spark_kafka_eos.options import parse_reader_options
from spark_kafka_eos.read.reader import KafkaEosBatchReader, KafkaEosStreamReader
from spark_kafka_eos.schema import record_schema
from spark_kafka_eos.write.coordinator import FAULT_POINTS, open_session
from spark_kafka_eos.write.decision_log import DecisionLog
from spark_kafka_eos.write.input_schema import validate_input_schema
from spark_kafka_eos.write.recovery import abort_lingering, recover
from spark_kafka_eos.write.transaction_timeout import resolve_transaction_timeout_ms
from spark_kafka_eos.write.writer import KafkaEosBatchWriter, KafkaEosStreamWriter
from spark_kafka_eos.write.writer_options import parse_writer_options

FAIL_AT_OPTION = "testing.failAt"


class KafkaEosDataSource(DataSource):
    """Exactly-once Kafka for Spark: ``format("kafka_eos")`` with the options of Spark's Kafka source
    and sink. Reads are read_committed and bounded by the last stable offset; each write epoch is one
    two-phase commit coordinated by the driver.
    """

    @classmethod
    def name(cls) -> str:
        return "kafka_eos"

    def schema(self) -> StructType:
        include_headers = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return record_schema(include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaEosBatchReader(parse_reader_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaEosStreamReader(parse_reader_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise KafkaEosOptionError("mode", "is overwrite; a Kafka topic can only be appended to.", "use .mode('append').")
        return self._prepare_writer(schema, streaming=False)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return self._prepare_writer(schema, streaming=True)

    def _prepare_writer(self, schema: StructType, streaming: bool) -> Union[KafkaEosStreamWriter, KafkaEosBatchWriter]:
        """Validate on the driver, then roll the prefix's last decision forward before any task of
        the epoch runs (see :mod:`spark_kafka_eos.write.recovery`)."""
        options = parse_writer_options(self.options, streaming=streaming)
        validate_input_schema(schema, options)
        fail_at = self.options.get(FAIL_AT_OPTION)
        if fail_at is not None and fail_at.partition(":")[0] not in FAULT_POINTS:
            raise KafkaEosOptionError(FAIL_AT_OPTION, f"is {fail_at!r}.", f"use one of {', '.join(FAULT_POINTS)} (test-only).")
        timeout_ms = resolve_transaction_timeout_ms(options)
        decision_log = DecisionLog(options)
        decision_log.ensure_topic()
        with open_session(options) as session:
            recover(session, decision_log, options.prefix)
            if not streaming:
                # writer() runs once, before any task of the job (streamWriter() also runs in the
                # commit process, after the tasks): what is open now is left over from earlier jobs.
                abort_lingering(session, options.prefix, timeout_ms)
        writer_class = KafkaEosStreamWriter if streaming else KafkaEosBatchWriter
        return writer_class(options, timeout_ms, fail_at)
