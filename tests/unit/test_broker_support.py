"""Which brokers the sink accepts, by the APIs they advertise (a real Kafka 3.9 broker is in
tests/integration/packaging/test_kafka3_broker.py)."""

from __future__ import annotations

from spark_kafka_eos._internal.write.broker_support import missing_apis

KAFKA_2_8 = {"Produce": (0, 9), "InitProducerId": (0, 4), "EndTxn": (0, 3), "DescribeProducers": (0, 0)}
KAFKA_3_0 = {**KAFKA_2_8, "DescribeTransactions": (0, 0), "ListTransactions": (0, 0)}


def test_a_broker_before_kafka_3_lacks_the_transaction_admin_apis() -> None:
    assert missing_apis(KAFKA_2_8) == ["ListTransactions", "DescribeTransactions"]


def test_kafka_3_and_later_have_them() -> None:
    assert missing_apis(KAFKA_3_0) == []
