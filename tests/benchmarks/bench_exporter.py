"""What ``kafka-eos list`` and a scrape of ``kafka-eos exporter`` cost on a decision log of many prefixes.

    PYTHONPATH=. .venv/bin/python -m tests.benchmarks.bench_exporter
    BENCH_PREFIXES=1000 BENCH_OPEN=20 BENCH_SCRAPES=5 PYTHONPATH=. .venv/bin/python -m tests.benchmarks.bench_exporter

A decision log of ``BENCH_PREFIXES`` prefixes (each a decision record naming one participant on one of the 8
partitions of a sink topic: the log as the sink leaves it, written in one transaction), ``BENCH_OPEN`` of them with
a transaction left open on the sink topic. Measured: a ``list`` (a full read of the log), the exporter's first
scrape (the same) and its later scrapes (only what the log gained: nothing here), and the broker requests a later
scrape makes (with ``BENCH_REQUESTS=1``, from the embedded broker's request log).
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from contextlib import ExitStack

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_kafka_eos._internal.cluster import open_session
from spark_kafka_eos._internal.config.writer import parse_writer_options
from spark_kafka_eos._internal.decision_log.records import LogRecord, Participant
from spark_kafka_eos._internal.ops.exporter import KafkaEosCollector, scrape_once
from spark_kafka_eos._internal.ops.prefix_status import PrefixCatalog, prefix_statuses
from tests.benchmarks.common import bootstrap_servers, request_log

PREFIXES = int(os.environ.get("BENCH_PREFIXES", "1000"))
OPEN = int(os.environ.get("BENCH_OPEN", "20"))
SCRAPES = int(os.environ.get("BENCH_SCRAPES", "5"))
SINK_PARTITIONS = 8


def main() -> None:
    with ExitStack() as stack:
        bootstrap = bootstrap_servers(stack)
        tag = uuid.uuid4().hex[:6]
        log_topic, sink = f"_decisions-bench-{tag}", f"bench-sink-{tag}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for topic, partitions, config in ((log_topic, 1, {"cleanup.policy": "compact"}), (sink, SINK_PARTITIONS, {})):
            admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(30)
        prefixes = [f"bench-{tag}-{i:05d}" for i in range(PREFIXES)]
        writer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-log-writer-{tag}", "linger.ms": 20})
        writer.init_transactions(30)
        writer.begin_transaction()
        for i, prefix in enumerate(prefixes):
            participant = Participant(f"{prefix}-0123abcd-0-0-0", 1000 + i, 0, 0, ((sink, i % SINK_PARTITIONS, 10),))
            record = LogRecord("decision" if i % 10 == 0 else "complete", prefix, f"stream:query-{i}:{i}", (participant,))
            writer.produce(log_topic, key=prefix.encode(), value=record.to_json())
        writer.commit_transaction(60)
        lingering = []
        for i, prefix in enumerate(prefixes[:OPEN]):
            producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{prefix}-0123abcd-0-1-0"})
            producer.init_transactions(30)
            producer.begin_transaction()
            producer.produce(sink, value=b"open", partition=i % SINK_PARTITIONS)
            producer.flush(30)
            lingering.append(producer)  # kept: the transactions stay open until the benchmark ends
        options = parse_writer_options({"kafka.bootstrap.servers": bootstrap, "transactional.id.prefix": "bench-list",
                                        "decisionLogTopic": log_topic}, streaming=False)
        print(f">> a decision log of {PREFIXES:,} prefixes, {OPEN} of them with an open transaction, {SINK_PARTITIONS} sink partitions")

        began = time.perf_counter()
        with open_session(options.connection) as session:
            statuses = prefix_statuses(options, session, PrefixCatalog(options).refresh())
        listed = time.perf_counter() - began
        assert len(statuses) == PREFIXES and sum(len(s.open_transactions) for s in statuses) == OPEN, statuses[:3]
        print(f"   list (reads the whole log):          {listed:6.2f} s")

        collector = KafkaEosCollector(options, [])
        began = time.perf_counter()
        text = scrape_once(collector)
        first = time.perf_counter() - began
        assert f'kafka_eos_prefixes{{decision_log_topic="{log_topic}"}} {float(PREFIXES)}' in text
        print(f"   exporter, first scrape:              {first:6.2f} s  ({len(text.encode()) / 1024:,.0f} KiB of metrics)")
        requests = request_log()
        mark = requests.mark() if requests else None
        later = []
        for _ in range(SCRAPES):
            began = time.perf_counter()
            scrape_once(collector)
            later.append(time.perf_counter() - began)
        print(f"   exporter, later scrapes (median of {SCRAPES}): {statistics.median(later):6.2f} s  (rounds: "
              + ", ".join(f"{s:.2f}" for s in later) + ")")
        if requests and mark is not None:
            time.sleep(1)  # the broker logs a request when it completes
            print(f"   per later scrape: {requests.tally(mark, requests.mark()).summary(SCRAPES)}")
        for producer in lingering:
            producer.abort_transaction(30)


if __name__ == "__main__":
    main()
