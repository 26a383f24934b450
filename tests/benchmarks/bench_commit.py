"""Commit latency, with an empty decision log and with 100,000 records of other prefixes, in one run:
the decision log's part of a commit (read the prefix's last record, append the decision), and a whole
two-phase commit of the coordinator (3 and 8 participants: fence, read, verify, decide, phase 2, completion;
3 participants with a consumerGroup, whose offsets are compared and set; 3 participants on a prefix whose
history holds 1,000 runs, the most it keeps).

    make bench-commit          (or: python -m tests.benchmarks.bench_commit [--commits N] [--foreign N])
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from contextlib import ExitStack

import pyarrow as pa
from confluent_kafka import Producer

from spark_kafka_eos._internal.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord, Participant
from tests.benchmarks.common import bootstrap_servers, produce

TASKS = 8
WARM_UP_COMMITS = 10
PARTITIONS = 4


def decision(prefix: str, batch: int) -> LogRecord:
    """A typical small decision: 8 participants writing to 4 partitions each."""
    participants = tuple(
        Participant(f"{prefix}-{t}-0", 1_000 + t, 1, t, tuple(("orders", p, 100) for p in range(PARTITIONS)))
        for t in range(TASKS)
    )
    return LogRecord("decision", prefix, str(EpochId.stream("bench", batch)), participants)


def options(bootstrap: str, log_topic: str, prefix: str, topic: str = "orders", **extra: str) -> WriterOptions:
    return parse_writer_options(
        {"kafka.bootstrap.servers": bootstrap, "topic": topic, "transactional.id.prefix": prefix,
         "decisionLogTopic": log_topic, **extra},
        streaming=False,
    )


def commit_times_ms(opts: WriterOptions, commits: int, first_batch: int = 0) -> tuple[float, list[float]]:
    """(the prefix's first commit, the following ones), each ``last`` + ``append``, in milliseconds."""
    decision_log = KafkaDecisionLog(opts)
    decision_log.ensure_topic()
    decision_log.fence(opts.prefix)
    times = []
    for batch in range(first_batch, first_batch + commits + 1):
        started = time.perf_counter()
        decision_log.last(opts.prefix)
        decision_log.append(decision(opts.prefix, batch))
        times.append((time.perf_counter() - started) * 1000)
    return times[0], times[1:]


def coordinator_commit_times_ms(opts: WriterOptions, commits: int, first_batch: int = 0, participants: int = 3,
                                source: str | None = None) -> list[float]:
    """Whole commits of ``participants`` prepared tasks each (the tasks' writing is not timed), in milliseconds.
    With ``source``, each participant's rows come from its own partition of ``source`` (100 offsets per batch)."""
    from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
    from spark_kafka_eos._internal.write.task_producer import TaskIdentity, write_task

    coordinator = TwoPhaseCommitCoordinator(opts, 60_000)
    times = []
    for batch in range(first_batch, first_batch + commits):
        epoch = EpochId.stream("bench-query", batch)
        tasks = [write_task(opts, epoch, [_rows(source, p, batch)], task=TaskIdentity(p, 0, p), transaction_timeout_ms=60_000)
                 for p in range(participants)]
        started = time.perf_counter()
        coordinator.commit(epoch, tasks)
        times.append((time.perf_counter() - started) * 1000)
    return times


def _rows(source: str | None, partition: int, batch: int) -> pa.RecordBatch:
    values = pa.array([b"x" * 100] * 100, pa.binary())
    if source is None:
        return pa.record_batch([values], names=["value"])
    return pa.record_batch(
        [values, pa.array([source] * 100, pa.string()), pa.array([partition] * 100, pa.int32()),
         pa.array(range(batch * 100, batch * 100 + 100), pa.int64())],
        names=["value", "source_topic", "source_partition", "source_offset"])


def seed_history(opts: WriterOptions, runs: int) -> bool:
    """Give ``opts.prefix`` a last record whose history is full; False on a version without histories."""
    entries = tuple((f"batch:backfill-{i}", 1_700_000_000_000 + i) for i in range(runs))
    try:
        record = LogRecord("complete", opts.prefix, entries[-1][0], history=entries)  # type: ignore[call-arg]
    except TypeError:
        return False
    decision_log = KafkaDecisionLog(opts)
    decision_log.ensure_topic()
    decision_log.append(record)
    return True


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


def create_topic(bootstrap: str, name: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


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
        # Warm-ups: the topic is created, the clients connect, and a broker started a moment ago warms up (its
        # first few dozen transactions are slower).
        commit_times_ms(options(bootstrap, log_topic, f"bench-{run}-warmup"), WARM_UP_COMMITS)
        _, on_empty = commit_times_ms(empty, args.commits)
        whole = options(bootstrap, log_topic, f"bench-{run}-c", create_topic(bootstrap, f"bench-out-{run}", 3))
        coordinator_commit_times_ms(whole, WARM_UP_COMMITS)
        whole_on_empty = coordinator_commit_times_ms(whole, args.commits, first_batch=WARM_UP_COMMITS)

        started = time.perf_counter()
        write_foreign_records(bootstrap, log_topic, args.foreign)
        print(f">> wrote {args.foreign:,} records of 1,000 other prefixes in {time.perf_counter() - started:.1f}s")
        _, known = commit_times_ms(empty, args.commits, first_batch=args.commits + 1)
        first, fresh = commit_times_ms(options(bootstrap, log_topic, f"bench-{run}-b"), args.commits)
        whole_known = coordinator_commit_times_ms(whole, args.commits, first_batch=args.commits + WARM_UP_COMMITS)
        wider = coordinator_commit_times_ms(whole, args.commits, first_batch=2 * args.commits + WARM_UP_COMMITS, participants=8)
        source = create_topic(bootstrap, f"bench-in-{run}", 3)
        grouped = options(bootstrap, log_topic, f"bench-{run}-g", whole.topic or "", consumerGroup=f"bench-{run}-group")
        coordinator_commit_times_ms(grouped, 2, source=source)  # warms the group's clients
        with_group = coordinator_commit_times_ms(grouped, args.commits, first_batch=2, source=source)
        remembering = options(bootstrap, log_topic, f"bench-{run}-h", whole.topic or "")
        full_history = (coordinator_commit_times_ms(remembering, args.commits)
                        if seed_history(remembering, 1_000) else None)

        print(f">> decision-log commit latency (last + append), {args.commits} commits each, {TASKS} participants x "
              f"{PARTITIONS} partitions")
        print(f"   empty log                                      {summary(on_empty)}")
        print(f"   {args.foreign:,} foreign records, prefix seen before   {summary(known)}"
              f"   ({statistics.median(known) / statistics.median(on_empty):.2f}x empty)")
        print(f"   {args.foreign:,} foreign records, new prefix           {summary(fresh)}"
              f"   ({statistics.median(fresh) / statistics.median(on_empty):.2f}x empty)")
        print(f"   first commit of the new prefix (no index entry yet: one scan of the log): {first:.1f} ms")
        print(f">> whole two-phase commit (coordinator.commit, 3 participants), {args.commits} commits each")
        print(f"   empty log                                      {summary(whole_on_empty)}")
        print(f"   {args.foreign:,} foreign records                        {summary(whole_known)}"
              f"   ({statistics.median(whole_known) / statistics.median(whole_on_empty):.2f}x empty)")
        print(f"   the same, 8 participants                       {summary(wider)}"
              f"   ({statistics.median(wider) / statistics.median(whole_known):.2f}x 3 participants)")
        print(f"   3 participants with a consumerGroup            {summary(with_group)}"
              f"   ({statistics.median(with_group) / statistics.median(whole_known):.2f}x without)")
        if full_history is None:
            print("   3 participants, 1,000 runs of history          n/a (this version keeps no history)")
        else:
            print(f"   3 participants, 1,000 runs of history          {summary(full_history)}"
                  f"   ({statistics.median(full_history) / statistics.median(whole_known):.2f}x no history)")


if __name__ == "__main__":
    main()
