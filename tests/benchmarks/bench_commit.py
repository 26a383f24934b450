"""Commit latency of the decision log (the log's part of a commit: read the prefix's last record,
append the decision), with an empty log and with 100,000 records of other prefixes, in one run.

    make bench-commit          (or: python -m tests.benchmarks.bench_commit [--commits N] [--foreign N])
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from contextlib import ExitStack

from confluent_kafka import Producer

from spark_kafka_eos.write.decision_log import DecisionLog
from spark_kafka_eos.write.log_record import EpochId, LogRecord, Participant
from spark_kafka_eos.write.writer_options import WriterOptions, parse_writer_options
from tests.benchmarks.common import bootstrap_servers, produce

TASKS = 8
PARTITIONS = 4


def decision(prefix: str, batch: int) -> LogRecord:
    """A typical small decision: 8 participants writing to 4 partitions each."""
    participants = tuple(
        Participant(f"{prefix}-{t}-0", 1_000 + t, 1, t, tuple(("orders", p, 100) for p in range(PARTITIONS)))
        for t in range(TASKS)
    )
    return LogRecord("decision", prefix, str(EpochId.stream("bench", batch)), participants)


def options(bootstrap: str, log_topic: str, prefix: str) -> WriterOptions:
    return parse_writer_options(
        {"kafka.bootstrap.servers": bootstrap, "topic": "orders", "transactional.id.prefix": prefix,
         "decisionLogTopic": log_topic},
        streaming=False,
    )


def commit_times_ms(opts: WriterOptions, commits: int, first_batch: int = 0) -> tuple[float, list[float]]:
    """(the prefix's first commit, the following ones), each ``last`` + ``append``, in milliseconds."""
    decision_log = DecisionLog(opts)
    decision_log.ensure_topic()
    decision_log.fence(opts.prefix)
    times = []
    for batch in range(first_batch, first_batch + commits + 1):
        started = time.perf_counter()
        decision_log.last(opts.prefix)
        decision_log.append(decision(opts.prefix, batch))
        times.append((time.perf_counter() - started) * 1000)
    return times[0], times[1:]


def write_foreign_records(bootstrap: str, log_topic: str, count: int, per_transaction: int = 5_000) -> None:
    """``count`` decisions of 1,000 other prefixes, in transactions as their coordinators write them."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-other-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 20})
    producer.init_transactions(30)
    for start in range(0, count, per_transaction):
        producer.begin_transaction()
        for i in range(start, min(start + per_transaction, count)):
            other = f"other-{i % 1_000}"
            produce(producer, log_topic, decision(other, i).to_json(), other.encode(), 0)
        producer.commit_transaction(60)


def summary(times: list[float]) -> str:
    p90 = statistics.quantiles(times, n=10)[-1]
    return f"median {statistics.median(times):7.1f} ms   p90 {p90:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=25)
    parser.add_argument("--foreign", type=int, default=100_000)
    args = parser.parse_args()
    with ExitStack() as stack:
        bootstrap = bootstrap_servers(stack)
        log_topic = f"_kafka_eos_bench_decisions-{uuid.uuid4().hex[:8]}"
        run = uuid.uuid4().hex[:6]
        empty = options(bootstrap, log_topic, f"bench-{run}-a")
        commit_times_ms(options(bootstrap, log_topic, f"bench-{run}-warmup"), 3)  # creates the topic, warms clients
        _, on_empty = commit_times_ms(empty, args.commits)

        started = time.perf_counter()
        write_foreign_records(bootstrap, log_topic, args.foreign)
        print(f">> wrote {args.foreign:,} records of 1,000 other prefixes in {time.perf_counter() - started:.1f}s")
        _, known = commit_times_ms(empty, args.commits, first_batch=args.commits + 1)
        first, fresh = commit_times_ms(options(bootstrap, log_topic, f"bench-{run}-b"), args.commits)

        print(f">> decision-log commit latency (last + append), {args.commits} commits each, {TASKS} participants x "
              f"{PARTITIONS} partitions")
        print(f"   empty log                                      {summary(on_empty)}")
        print(f"   {args.foreign:,} foreign records, prefix seen before   {summary(known)}"
              f"   ({statistics.median(known) / statistics.median(on_empty):.2f}x empty)")
        print(f"   {args.foreign:,} foreign records, new prefix           {summary(fresh)}"
              f"   ({statistics.median(fresh) / statistics.median(on_empty):.2f}x empty)")
        print(f"   first commit of the new prefix (no index entry yet: one scan of the log): {first:.1f} ms")


if __name__ == "__main__":
    main()
