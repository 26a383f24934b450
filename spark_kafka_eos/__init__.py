"""spark-kafka-eos: exactly-once Kafka for PySpark, as the Python data source ``kafka_eos``.

>>> from spark_kafka_eos import KafkaEosDataSource
>>> spark.dataSource.register(KafkaEosDataSource)   # optional: installed, it registers itself
>>> spark.read.format("kafka_eos").option("kafka.bootstrap.servers", "...").option("subscribe", "t").load()

The public API is what ``__all__`` names (``help(KafkaEosDataSource)`` lists the options), the error
classes (also in :mod:`spark_kafka_eos.errors`), :mod:`spark_kafka_eos.schema_registry` (Confluent wire
format columns) and the ``spark_kafka_eos.librdkafka`` logger. Everything in ``spark_kafka_eos._internal`` is
internal and may change in any release.
"""

from spark_kafka_eos._internal.spark_support import require_supported_spark

require_supported_spark()

from typing import TYPE_CHECKING, Any  # noqa: E402

from spark_kafka_eos import errors  # noqa: E402 - after the check, which names what is missing
from spark_kafka_eos._internal.threads import activate_session  # noqa: E402
from spark_kafka_eos.errors import *  # noqa: E402, F403 - every public error class, CommitOutcome and commit_outcome

if TYPE_CHECKING:
    from spark_kafka_eos.datasource import KafkaEosDataSource

__all__ = ["KafkaEosDataSource", "activate_session"]
__all__ += errors.__all__
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Imported on first use: a Spark task's Python worker unpickles only its reader's or writer's modules, and
    # importing the whole data source there would slow every new worker's start.
    if name == "KafkaEosDataSource":
        from spark_kafka_eos.datasource import KafkaEosDataSource

        return KafkaEosDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
