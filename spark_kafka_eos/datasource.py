"""``KafkaEosDataSource``: the ``kafka_eos`` Python data source. Name, schema and factories only."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from spark_kafka_eos.options import parse_reader_options
from spark_kafka_eos.read.reader import KafkaEosBatchReader, KafkaEosStreamReader
from spark_kafka_eos.schema import record_schema


class KafkaEosDataSource(DataSource):
    """Exactly-once Kafka for Spark: ``format("kafka_eos")`` with the options of Spark's Kafka source.

    Reads are read_committed and bounded by the last stable offset.
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
