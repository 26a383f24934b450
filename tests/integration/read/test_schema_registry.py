"""Confluent wire-format values read with kafka_eos and split by ``spark_kafka_eos.schema_registry``: real Avro
payloads, JSON payloads decoded by from_json, and values written by confluent-kafka's own Avro, JSON and Protobuf
serializers with the schema id in the value's prefix or in a header."""

from __future__ import annotations

import io
import json
import struct
import uuid
from typing import Any

import avro.io
import avro.schema
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient, header_schema_id_serializer
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

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


# -- confluent-kafka's own serializers, ids in the value's prefix and in headers -------------------------------------
def protobuf_classes() -> tuple[type[Message], type[Message]]:
    """``Order`` (the file's second message: indexes [1]) and ``Order.Line`` (nested in it: [1, 0]), built from a
    descriptor at run time (no protoc)."""
    fields = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="kafka_eos_orders.proto", package="kafka_eos_test", syntax="proto3")
    file.message_type.add(name="Ping").field.add(name="n", number=1, type=fields.TYPE_INT64, label=fields.LABEL_OPTIONAL)
    order = file.message_type.add(name="Order")
    for number, (name, kind) in enumerate((("id", fields.TYPE_INT64), ("item", fields.TYPE_STRING), ("price", fields.TYPE_DOUBLE)), 1):
        order.field.add(name=name, number=number, type=kind, label=fields.LABEL_OPTIONAL)
    order.nested_type.add(name="Line").field.add(name="sku", number=1, type=fields.TYPE_STRING, label=fields.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return (message_factory.GetMessageClass(pool.FindMessageTypeByName("kafka_eos_test.Order")),
            message_factory.GetMessageClass(pool.FindMessageTypeByName("kafka_eos_test.Order.Line")))


ORDER_JSON_SCHEMA = json.dumps({"type": "object", "properties": {
    "id": {"type": "integer"}, "item": {"type": "string"}, "price": {"type": ["number", "null"]}}})


def serialized(topic: str, serializer: Any, objects: list[Any]) -> list[Sent]:
    """``objects`` as records, written by one of confluent-kafka's Schema Registry serializers (its headers too)."""
    records = []
    for obj in objects:
        headers: list[tuple[str, bytes | None]] = []
        value = serializer(obj, SerializationContext(topic, MessageField.VALUE, headers))
        records.append(Sent(0, None, value, tuple(headers) or None))
    return records


# The header case in the long tier (make test's budget): test_keys_split_with_key_true runs it in make test.
@pytest.mark.parametrize("id_in", ["prefix", pytest.param("header", marks=pytest.mark.long)])
def test_confluents_serializers_avro_json_and_protobuf(spark_with_avro: SparkSession, kafka: KafkaTestCluster, id_in: str) -> None:
    """Values written by confluent-kafka's own Avro, JSON and Protobuf serializers (its mock registry client as the
    registry), with the schema id in the value's prefix or, as Schema Registry 8.0 can, in a header: each splits
    into its id and a payload that decodes to what was written (the Avro one by Spark's own ``from_avro`` too),
    Protobuf messages (top-level and nested) with their message indexes."""
    spark = spark_with_avro
    registry = SchemaRegistryClient.new_client({"url": "mock://kafka-eos-test"})
    conf = {"schema.id.serializer": header_schema_id_serializer} if id_in == "header" else {}
    order, line = protobuf_classes()
    topics = {name: kafka.create_topic(1) for name in ("avro", "json", "protobuf")}
    avro_orders = serialized(topics["avro"], AvroSerializer(registry, str(ORDER), conf=conf), ORDERS)
    json_orders = serialized(topics["json"], JSONSerializer(ORDER_JSON_SCHEMA, registry, conf=conf), ORDERS)
    messages: list[Message] = [order(id=o["id"], item=o["item"], price=o["price"] or 0.0) for o in ORDERS[:10]]
    messages += [line(sku=f"sku-{i}") for i in range(5)] + [order()]  # an all-default message is empty bytes
    proto_serializer = {"order": ProtobufSerializer(order, registry, conf={**conf, "use.deprecated.format": False}),
                        "line": ProtobufSerializer(line, registry, conf={**conf, "use.deprecated.format": False})}
    proto_records = [record for m in messages for record in serialized(
        topics["protobuf"], proto_serializer["line" if isinstance(m, line) else "order"], [m])]
    for name, records in (("avro", avro_orders), ("json", json_orders), ("protobuf", proto_records)):
        assert [r.headers is not None for r in records] == [id_in == "header"] * len(records)
        kafka.produce_plain(topics[name], records)

    def split(name: str, protobuf: bool = False) -> list[Any]:
        df = kafka_eos(spark, kafka, subscribe=topics[name], includeHeaders="true").orderBy("offset")
        return [r.v for r in df.select(wire_format("value", "headers", protobuf=protobuf).alias("v")).collect()]

    def ids_as_written(rows: list[Any]) -> None:
        if id_in == "prefix":
            assert all(r.schema_id is not None and r.schema_guid is None for r in rows)
        else:
            assert all(r.schema_id is None and r.schema_guid is not None and str(uuid.UUID(r.schema_guid)) == r.schema_guid for r in rows)

    avro_rows = split("avro")
    ids_as_written(avro_rows)
    assert [avro_record(bytes(r.payload)) for r in avro_rows] == ORDERS
    decoded = (kafka_eos(spark, kafka, subscribe=topics["avro"], includeHeaders="true").orderBy("offset")
               .select(from_avro(wire_format("value", "headers").payload, str(ORDER)).alias("order")).collect())
    assert [r.order.asDict() for r in decoded] == ORDERS
    json_rows = split("json")
    ids_as_written(json_rows)
    assert [json.loads(bytes(r.payload)) for r in json_rows] == ORDERS
    proto_rows = split("protobuf", protobuf=True)
    ids_as_written(proto_rows)
    assert [r.message_indexes for r in proto_rows] == [[1]] * 10 + [[1, 0]] * 5 + [[1]]
    assert [type(m).FromString(bytes(r.payload)) for m, r in zip(messages, proto_rows, strict=True)] == messages
    assert bytes(proto_rows[-1].payload) == b""
    # Without protobuf=True the indexes stay in the payload, as before.
    assert all(r.message_indexes is None for r in split("protobuf"))


@pytest.mark.parametrize("id_in", ["prefix", "header"])
def test_keys_split_with_key_true(spark: SparkSession, kafka: KafkaTestCluster, id_in: str) -> None:
    """A key written by confluent-kafka's Avro serializer (its header is ``__key_schema_id``) splits with ``key=True``;
    the value's header is not taken for the key's."""
    registry = SchemaRegistryClient.new_client({"url": "mock://kafka-eos-test-keys"})
    conf = {"schema.id.serializer": header_schema_id_serializer} if id_in == "header" else {}
    key_serializer = AvroSerializer(registry, str(ORDER), conf=conf)
    value_serializer = JSONSerializer(ORDER_JSON_SCHEMA, registry, conf=conf)
    topic = kafka.create_topic(1)
    records = []
    for order in ORDERS[:5]:
        headers: list[tuple[str, bytes | None]] = []
        key = key_serializer(order, SerializationContext(topic, MessageField.KEY, headers))
        value = value_serializer(order, SerializationContext(topic, MessageField.VALUE, headers))
        records.append(Sent(0, key, value, tuple(headers) or None))
    kafka.produce_plain(topic, records)
    df = kafka_eos(spark, kafka, subscribe=topic, includeHeaders="true").orderBy("offset")
    rows = df.select(wire_format("key", "headers", key=True).alias("k"), wire_format("value", "headers").alias("v")).collect()
    assert [avro_record(bytes(r.k.payload)) for r in rows] == ORDERS[:5]
    assert [json.loads(bytes(r.v.payload)) for r in rows] == ORDERS[:5]
    if id_in == "header":
        assert all(r.k.schema_guid is not None and r.k.schema_guid != r.v.schema_guid and r.k.schema_id is None for r in rows)
    else:
        assert all(r.k.schema_id is not None and r.k.schema_guid is None for r in rows)
