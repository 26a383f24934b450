"""The implementation behind spark-kafka-eos's public API: every module here may change in any release.

The public API is :mod:`spark_kafka_eos` (what its ``__all__`` names), :mod:`spark_kafka_eos.errors`,
:mod:`spark_kafka_eos.schema_registry`, the data source class in :mod:`spark_kafka_eos.datasource`, the ``kafka-eos``
command (:mod:`spark_kafka_eos.cli`) and the ``spark_kafka_eos.librdkafka`` logger."""
