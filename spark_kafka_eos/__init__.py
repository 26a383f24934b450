"""spark-kafka-eos: exactly-once Kafka for PySpark, as the Python data source ``kafka_eos``.

>>> from spark_kafka_eos import KafkaEosDataSource
>>> spark.dataSource.register(KafkaEosDataSource)   # optional: installed, it registers itself
>>> spark.read.format("kafka_eos").option("kafka.bootstrap.servers", "...").option("subscribe", "t").load()
"""

from spark_kafka_eos.spark_support import require_supported_spark

require_supported_spark()

from spark_kafka_eos.datasource import KafkaEosDataSource  # noqa: E402 - after the check, which names what is missing
from spark_kafka_eos.threads import activate_session  # noqa: E402

__all__ = ["KafkaEosDataSource", "activate_session"]
__version__ = "0.1.0"
