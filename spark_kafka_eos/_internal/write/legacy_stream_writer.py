"""The stream writer for Spark 4.0, which has no ``DataSourceStreamArrowWriter``.

Spark 4.0's write worker hands Arrow record batches to any writer that is a ``DataSourceArrowWriter``
and Rows to the others, batch or stream alike; its streaming sink runner calls the writer's
``commit(messages, batchId)`` and ``abort(messages, batchId)``. A stream writer that is also an Arrow
writer gets the same record batches as on later Sparks, with no conversion to Rows."""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter

from spark_kafka_eos._internal.write.writer import StreamWriterCore


class KafkaEosLegacyStreamWriter(StreamWriterCore, DataSourceStreamWriter, DataSourceArrowWriter):  # type: ignore[misc]  # commit/abort: the stream writer's
    """``df.writeStream.format("kafka_eos")`` on Spark 4.0."""
