"""Confluent wire-format values (magic byte, schema id, payload) read with kafka_eos and split by
``spark_kafka_eos.schema_registry``: real Avro payloads, and JSON payloads decoded by from_json."""

from __future__ import annotations

import io
import json
import struct

import avro.io
import avro.schema
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_kafka_eos.schema_registry import wire_format
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.spark import kafka_eos

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ORDER = avro.schema.parse(json.dumps({
    "type": "record", "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}, {"name": "price", "type": ["null", "double"]}],
}))
ORDERS = [{"id": i, "item": f"item-{i}" * (i % 3 + 1), "price": None if i % 4 == 0 else i * 1.5} for i in range(20)]


def confluent(schema_id: int, body: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + body


def avro_bytes(record: dict[str, object]) -> bytes:
    out = io.BytesIO()
    avro.io.DatumWriter(ORDER).write(record, avro.io.BinaryEncoder(out))
    return out.getvalue()


def avro_record(body: bytes) -> dict[str, object]:
    return avro.io.DatumReader(ORDER).read(avro.io.BinaryDecoder(io.BytesIO(body)))


def test_avro_values_split_into_schema_id_and_payload(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, confluent(70_000 + i % 2, avro_bytes(o))) for i, o in enumerate(ORDERS)])
    kafka.produce_plain(topic, [Sent(0, None, b"not wire format"), Sent(0, None, None), Sent(0, None, b"\x00\x01")])
    rows = kafka_eos(spark, kafka, subscribe=topic).orderBy("offset").select(wire_format("value").alias("v")).collect()
    assert [r.v.schema_id for r in rows] == [70_000 + i % 2 for i in range(len(ORDERS))] + [None, None, None]
    assert [avro_record(bytes(r.v.payload)) for r in rows[: len(ORDERS)]] == ORDERS
    assert [r.v.payload for r in rows[len(ORDERS):]] == [None, None, None]


def test_json_payloads_decode_with_from_json(spark: SparkSession, kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(1)
    kafka.produce_plain(topic, [Sent(0, None, confluent(7, json.dumps(o).encode())) for o in ORDERS])
    df = kafka_eos(spark, kafka, subscribe=topic).select(wire_format("value").alias("v"))
    decoded = df.select(F.from_json(F.col("v.payload").cast("string"), "id BIGINT, item STRING, price DOUBLE").alias("o"))
    assert sorted((r.o.id, r.o.item, r.o.price) for r in decoded.collect()) == [(o["id"], o["item"], o["price"]) for o in ORDERS]
