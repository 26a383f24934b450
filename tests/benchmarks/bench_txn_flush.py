"""What a task's flush costs as its records spread over more partitions: 300 records of 100 bytes produced
round robin into 2, 8, 32 and 64 partitions and flushed, by a transactional producer (a kafka_eos task: every
partition is added to the transaction and each first produce of it is verified by the broker), an idempotent one
and a plain one (``acks=all`` both), librdkafka through confluent-kafka, medians over 20 flushes after 5.

librdkafka sends one produce request per partition (its issue #1700) and a broker serves one request of a connection
at a time, so the flush grows with the partitions; the Java client (Spark's sink) sends one request per broker.

    PYTHONPATH=. .venv/bin/python -m tests.benchmarks.bench_txn_flush
"""

from __future__ import annotations

import statistics
import time
import uuid
from contextlib import ExitStack

from confluent_kafka import Producer, libversion
from confluent_kafka.admin import AdminClient, NewTopic

from tests.benchmarks.common import bootstrap_servers, produce

RECORDS = 300
FLUSHES = 20
WARM_UP = 5
PARTITION_COUNTS = (2, 8, 32, 64)
PRODUCERS = {
    "transactional": {"enable.idempotence": True},
    "idempotent": {"enable.idempotence": True},
    "plain": {"enable.idempotence": False},
}


def flush_times_ms(bootstrap: str, topic: str, partitions: int, kind: str) -> list[float]:
    config = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", **PRODUCERS[kind]}
    transactional = kind == "transactional"
    if transactional:
        config["transactional.id"] = f"bench-flush-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    if transactional:
        producer.init_transactions(30)
    times = []
    for _ in range(WARM_UP + FLUSHES):
        if transactional:
            producer.begin_transaction()
        started = time.perf_counter()
        for i in range(RECORDS):
            produce(producer, topic, b"v" * 100, str(i).encode(), i % partitions)
        producer.flush(30)
        times.append((time.perf_counter() - started) * 1000)
        if transactional:
            producer.commit_transaction(30)
        time.sleep(0.2)  # the broker writes the last transaction's markers; a task's next transaction comes later too
    return times[WARM_UP:]


def main() -> None:
    with ExitStack() as stack:
        bootstrap = bootstrap_servers(stack)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        print(f">> librdkafka {libversion()[0]}: flush of {RECORDS} records spread over the partitions, median (p90) ms")
        print(f"{'partitions':>10}  " + "  ".join(f"{kind:>16}" for kind in PRODUCERS))
        for partitions in PARTITION_COUNTS:
            topic = f"bench-flush-{partitions}-{uuid.uuid4().hex[:6]}"
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
            cells = []
            for kind in PRODUCERS:
                times = flush_times_ms(bootstrap, topic, partitions, kind)
                cells.append(f"{statistics.median(times):8.1f} ({statistics.quantiles(times, n=10)[-1]:5.1f})")
            print(f"{partitions:>10}  " + "  ".join(f"{cell:>16}" for cell in cells), flush=True)


if __name__ == "__main__":
    main()
