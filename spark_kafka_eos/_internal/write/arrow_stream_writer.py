"""The stream writer for Spark 4.1 and later, which hand Arrow record batches to a
``DataSourceStreamArrowWriter``."""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamArrowWriter

from spark_kafka_eos._internal.write.writer import StreamWriterCore


class KafkaEosStreamWriter(StreamWriterCore, DataSourceStreamArrowWriter):
    """``df.writeStream.format("kafka_eos")`` on Spark 4.1+."""
