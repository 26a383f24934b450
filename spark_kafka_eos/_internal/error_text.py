"""One line that says what an error is, for the operator tools' messages."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from spark_kafka_eos._internal.client_errors import ClientCallError
from spark_kafka_eos.errors import KafkaEosError


def error_text(err: BaseException) -> str:
    """The message of our own and Kafka's errors (either client's), the type too for anything else; on one line."""
    if isinstance(err, KafkaException) and err.args and isinstance(err.args[0], KafkaError):
        text = f"Kafka: {err.args[0].str()}"
    elif isinstance(err, ClientCallError):
        text = f"Kafka: {err.error.description}"
    elif isinstance(err, (KafkaEosError, ValueError)):
        text = str(err)
    else:
        text = f"{type(err).__name__}: {err}"
    return " ".join(text.split())
