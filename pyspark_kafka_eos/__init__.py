"""Auto-registration shim: Spark registers ``DefaultSource`` of every top-level ``pyspark_*``
module, so ``format("kafka_eos")`` works after ``pip install`` with no register call."""

from spark_kafka_eos.datasource import KafkaEosDataSource as DefaultSource

__all__ = ["DefaultSource"]
