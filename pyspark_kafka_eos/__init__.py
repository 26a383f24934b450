"""Auto-registration shim: Spark registers ``DefaultSource`` of every top-level ``pyspark_*``
module, so ``format("kafka_eos")`` works after ``pip install`` with no register call.

It never raises: Spark imports every ``pyspark_*`` module in one lookup, and an error here would hide
every other installed Python data source. On a Spark the package cannot run on, ``format("kafka_eos")``
fails instead, with the reason."""

try:
    from spark_kafka_eos.datasource import KafkaEosDataSource as DefaultSource
except ImportError as unavailable:
    _reason = str(unavailable)
    try:
        from pyspark.sql.datasource import DataSource
    except ImportError:  # no Python data sources at all (Spark 3.x): nothing to register
        pass
    else:

        class DefaultSource(DataSource):  # type: ignore[no-redef]
            """``kafka_eos`` where it cannot run: using it raises the reason."""

            @classmethod
            def name(cls) -> str:
                return "kafka_eos"

            def __init__(self, options: dict) -> None:
                raise ImportError(_reason)

__all__ = ["DefaultSource"]
