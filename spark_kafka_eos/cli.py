"""Inspect and repair a transactional id prefix of the ``kafka_eos`` sink.

    kafka-eos inspect --bootstrap-servers B --prefix P [--topic T ...]
    kafka-eos recover --bootstrap-servers B --prefix P
    kafka-eos reset   --bootstrap-servers B --prefix P [--yes]
    kafka-eos lag     --bootstrap-servers B --group G --topic T [--topic T ...]

(``python -m spark_kafka_eos.cli`` where the package is importable but its command is not installed.)

``inspect`` only reads. ``recover`` does what the driver's recovery and commit do: roll the last decision
forward, then abort (and fence) every open transaction of the prefix. ``reset`` recovers, then appends a
``reset`` record so that a new query (a new checkpoint) may reuse the prefix from micro-batch 0.
``lag`` prints a consumer group's offsets against each partition's last stable offset and high
watermark (the sink's ``consumerGroup``, or a stream's ``progressGroup``).
Options are parsed by :func:`parse_writer_options`, as the sink parses them; secrets are never printed.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from confluent_kafka import KafkaError, KafkaException

from spark_kafka_eos.client_errors import ClientCallError
from spark_kafka_eos.cluster import open_session
from spark_kafka_eos.config.reader import (
    PartitionKey,
    ReaderOptions,
    Subscription,
    internal_read_options,
    parse_reader_options,
)
from spark_kafka_eos.config.secrets import redact, scrub
from spark_kafka_eos.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos.errors import CommitOutcome, KafkaEosCommitError, KafkaEosError
from spark_kafka_eos.read.offset_lookup import KafkaOffsetLookup
from spark_kafka_eos.txn.session import TransactionSession, TxnDescription
from spark_kafka_eos.write.coordinator import RecoveryReport, TwoPhaseCommitCoordinator
from spark_kafka_eos.write.decision_log import DecisionLog
from spark_kafka_eos.write.log_record import HISTORY_LIMIT, LogRecord, history_without, memory_after
from spark_kafka_eos.write.recovery import abort_lingering, open_transactions
from spark_kafka_eos.write.transaction_timeout import resolve_transaction_timeout_ms

EXIT_OK = 0
EXIT_NOTHING_DONE = 1
EXIT_ERROR = 2
EXIT_COMMITTED_UNFINISHED = 3
EXIT_OUTCOME_UNKNOWN = 4
_EXIT_BY_OUTCOME = {
    CommitOutcome.ABORTED: EXIT_ERROR,
    CommitOutcome.REFUSED: EXIT_NOTHING_DONE,
    CommitOutcome.COMMITTED: EXIT_COMMITTED_UNFINISHED,
    CommitOutcome.UNKNOWN: EXIT_OUTCOME_UNKNOWN,
}

Command = Callable[[WriterOptions, TransactionSession, argparse.Namespace], int]
"""A command on one prefix of the sink."""
ClusterCommand = Callable[[argparse.Namespace], int]
"""A command on the cluster alone (``lag``)."""

_EPILOG = """\
exit codes: 0 done (inspect: always), 1 refused or nothing to do, 2 error (one line on stderr),
3 an epoch is committed but not all of it visible yet (run recover again), 4 an epoch's outcome is unknown.
recover and reset abort every open transaction of the prefix: run them only when the query that
uses the prefix is stopped (a running query would see its current epoch aborted)."""


class KafkaEosCliError(KafkaEosError):
    """A problem the command line tool reports as one line on stderr."""


@dataclass(frozen=True)
class PartitionOffsets:
    """Last stable offset vs high watermark of one topic-partition."""

    topic: str
    partition: int
    last_stable: int
    high_watermark: int

    @property
    def pinned(self) -> bool:
        """True when an open transaction holds read_committed consumers below the high watermark."""
        return self.last_stable < self.high_watermark


# -- entry point ------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 refused / nothing done, 2 error, 3 committed but not all
    visible yet, 4 outcome unknown: :class:`~spark_kafka_eos.errors.CommitOutcome`). Without ``argv``
    (run as a program: the ``kafka-eos`` command or ``python -m spark_kafka_eos.cli``), the modules'
    warnings (e.g. the aborted ids), which the commands print on stdout already, are not echoed on stderr."""
    if argv is None:
        logging.basicConfig(level=logging.ERROR, format="%(name)s: %(message)s")
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # argparse: 0 after --help, 2 on a usage error (already printed)
        return done.code if isinstance(done.code, int) else EXIT_ERROR
    try:
        if args.command is lag_command:
            return lag_command(args)
        options = writer_options(args)
        with open_session(options.connection) as session:
            command: Command = args.command
            return command(options, session, args)
    except Exception as err:  # every failure is one line on stderr, never a traceback
        print(f"error: {scrub(_error_text(err), dict(args.kafka))}", file=sys.stderr)
        return _EXIT_BY_OUTCOME[err.outcome] if isinstance(err, KafkaEosCommitError) else EXIT_ERROR


PROGRAM = "kafka-eos"
"""The name the CLI gives itself in its help and usage, whichever way it was started."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``kafka-eos`` command (also ``python -m spark_kafka_eos.cli``)."""
    cluster = argparse.ArgumentParser(add_help=False)
    cluster.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT[,...]", help="the Kafka cluster")
    cluster.add_argument("--kafka", action="append", default=[], type=_setting, metavar="KEY=VALUE",
                         help="a librdkafka client setting, as the sink's kafka.* options (security etc.); repeatable")
    common = argparse.ArgumentParser(add_help=False, parents=[cluster])
    common.add_argument("--prefix", required=True, help="the transactional.id.prefix of the sink")
    common.add_argument("--decision-log-topic", metavar="TOPIC",
                        help="the sink's decisionLogTopic option (default: _kafka_eos_decisions)")
    parser = argparse.ArgumentParser(prog=PROGRAM, epilog=_EPILOG,
                                     description="Inspect and repair a transactional id prefix of the kafka_eos sink.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    inspect_parser = _add_command(commands, common, inspect_command, "show the prefix's last decision-log record, "
                                  "its open transactions and, per --topic, last stable offset vs high watermark")
    inspect_parser.add_argument("--topic", action="append", default=[], metavar="TOPIC",
                                help="also show this topic's last stable offset vs high watermark; repeatable")
    _add_command(commands, common, recover_command, "roll the prefix's last decision forward, then abort every "
                 "open transaction of the prefix (as the driver's recovery and commit do)")
    reset_parser = _add_command(commands, common, reset_command, "recover, then append a reset record, so that a "
                                "new query (new checkpoint) may reuse the prefix from micro-batch 0")
    reset_parser.add_argument("--yes", action="store_true", help="do it (without: only print what would happen)")
    reset_parser.add_argument("--accept-data-loss", action="store_true",
                              help="with --yes: reset even when the last decision has participants that can no "
                              "longer be committed (their records are lost; the output names them)")
    lag_parser = _add_command(commands, cluster, lag_command, "print a consumer group's offset, the last stable "
                              "offset, the high watermark and the lag of each partition of the --topic(s)")
    lag_parser.add_argument("--group", required=True, help="the consumer group (a sink's consumerGroup, a stream's progressGroup)")
    lag_parser.add_argument("--topic", action="append", required=True, metavar="TOPIC", help="a topic the group reads; repeatable")
    return parser


def _add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser,
                 command: Command | ClusterCommand, summary: str) -> argparse.ArgumentParser:
    name = command.__name__.removesuffix("_command")
    sub = commands.add_parser(name, parents=[common], help=summary, description=summary[0].upper() + summary[1:] + ".",
                              epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub.set_defaults(command=command)
    return sub


def writer_options(args: argparse.Namespace) -> WriterOptions:
    """The sink's options for this prefix, parsed exactly as the sink parses them."""
    settings: dict[str, str] = dict(args.kafka)
    if "bootstrap.servers" in settings:
        raise KafkaEosCliError("give the brokers with --bootstrap-servers, not --kafka bootstrap.servers=...")
    options = {f"kafka.{key}": value for key, value in settings.items()}
    options.update({"kafka.bootstrap.servers": args.bootstrap_servers, "transactional.id.prefix": args.prefix})
    if args.decision_log_topic is not None:
        options["decisionLogTopic"] = args.decision_log_topic
    return parse_writer_options(options, streaming=False)


def _setting(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (``kafka.KEY=VALUE`` too); the value is never echoed, it may be a secret."""
    key, separator, value = text.partition("=")
    key = key.strip().lower()
    key = key[len("kafka."):] if key.startswith("kafka.") else key
    if not separator or not key:
        raise argparse.ArgumentTypeError("expected KEY=VALUE, a librdkafka setting such as security.protocol=SASL_SSL")
    return key, value


# -- commands ---------------------------------------------------------------------------------
def inspect_command(options: WriterOptions, session: TransactionSession, args: argparse.Namespace) -> int:
    """Print the last record, the open transactions and, per ``--topic``, LSO vs high watermark."""
    now_ms = _now_ms()
    offsets = partition_offsets(options, args.topic) if args.topic else []
    decision_log = existing_decision_log(options)
    print(f"prefix {options.prefix} on {options.bootstrap_servers}, decision log topic {options.decision_log_topic}"
          + ("" if decision_log else " (does not exist)"))
    if options.kafka_config:
        print(f"client settings: {redact(options.kafka_config)}")
    last = decision_log.last(options.prefix) if decision_log else None
    print("\n".join(record_lines(last, now_ms, _participant_states(session, last))))
    print("\n".join(transaction_lines(open_transactions(session, options.prefix), now_ms)))
    for line in offset_lines(offsets):
        print(line)
    return EXIT_OK


def lag_command(args: argparse.Namespace) -> int:
    """Per partition: the group's offset, the LSO, the high watermark and the lag (LSO - group offset)."""
    options = {f"kafka.{key}": value for key, value in dict(args.kafka).items()}
    options.update({"kafka.bootstrap.servers": args.bootstrap_servers, "subscribe": ",".join(args.topic)})
    reader_options = parse_reader_options(options, streaming=False)
    lookup = KafkaOffsetLookup(reader_options)
    partitions = lookup.partitions(reader_options.subscription, must_exist=True)
    written, stable = lookup.log_end(partitions), lookup.latest(partitions)
    committed = lookup.committed(args.group, partitions)
    for line in lag_lines(args.group, [(tp, committed.get(tp), stable[tp], written[tp]) for tp in sorted(partitions)]):
        print(line)
    return EXIT_OK


def lag_lines(group: str, rows: Sequence[tuple[PartitionKey, int | None, int, int]]) -> list[str]:
    """One line per partition, and the total; a partition without a group offset has no lag figure."""
    lines, total = [], 0
    for (topic, partition), offset, stable, written in rows:
        lag = None if offset is None else max(stable - offset, 0)
        total += lag or 0
        lines.append(f"topic {topic} partition {partition}: group offset {'none' if offset is None else offset}, "
                     f"last stable offset {stable}, high watermark {written}, lag {'-' if lag is None else lag}")
    return lines + [f"group {group}: total lag {total}"]


def recover_command(options: WriterOptions, session: TransactionSession, args: argparse.Namespace) -> int:
    """Roll forward and abort lingering transactions; exit 1 when there was nothing to do."""
    return EXIT_OK if recover_prefix(options, session)[0] else EXIT_NOTHING_DONE


def reset_command(options: WriterOptions, session: TransactionSession, args: argparse.Namespace) -> int:
    """Recover, then append a ``reset`` record; without ``--yes`` only say what would happen."""
    decision_log = existing_decision_log(options)
    last = decision_log.last(options.prefix) if decision_log else None
    if last is None:
        return _acknowledge_fresh_start(options, session, args)
    if decision_log is None or last.kind == "reset":
        print(f"nothing to reset: {_last_summary(options, decision_log, last)}; "
              "a new query may already use this prefix from micro-batch 0")
        return EXIT_NOTHING_DONE
    if not args.yes:
        print("\n".join(reset_plan(options, last, open_transactions(session, options.prefix))))
        return EXIT_NOTHING_DONE
    _, report = recover_prefix(options, session, accept_data_loss=args.accept_data_loss)
    reset = reset_record(report.last_before if report is not None and report.last_before is not None else last, report)
    moved_back = {(t, p): o for t, p, o in reset.offsets} if reset.consumer_group else None
    decision_log.append(reset, moved_back)
    if moved_back:
        print(f"moved consumerGroup {reset.consumer_group} back to where the forgotten epoch started: "
              + ", ".join(f"{t}-{p}: {o}" for (t, p), o in sorted(moved_back.items())))
    print(f"appended reset record {reset.epoch_id} for prefix {options.prefix} to {options.decision_log_topic}: "
          "a new query may use this prefix from micro-batch 0")
    return EXIT_OK


def reset_record(last: LogRecord, report: RecoveryReport | None) -> LogRecord:
    """The reset that follows ``last``. It keeps the prefix's history, but for an epoch whose loss it accepts:
    one with none of its records visible is forgotten (a re-run writes it whole, once); one with part of them
    visible is remembered as partly lost (a re-run would write the rest twice, so it is refused)."""
    history, memory = last.runs(), memory_after(last)
    group: str | None = None
    moved_back: tuple[tuple[str, int, int], ...] = ()
    if report is not None and report.data_loss and last.kind == "decision":
        if report.all_lost:
            history = history_without(last, last.epoch)
            if last.consumer_group and last.starts:
                # The lost decision moved its group past its input: back to where the epoch started, so that a
                # re-run from the group reads it again.
                group, moved_back = last.consumer_group, last.starts
                memory = memory_after(last, group, moved_back)
        elif last.epoch.kind == "batch":
            memory["partly_lost"] = (*last.partly_lost, last.epoch_id)[-HISTORY_LIMIT:]
    # A reset without history stands for its previous epoch (records written before histories were kept):
    # name none when the only epoch remembered was just forgotten.
    return LogRecord("reset", last.prefix, f"reset:{_now_ms()}", consumer_group=group, offsets=moved_back,
                     previous_epoch_id=last.epoch_id if history else None, history=history, **memory)  # type: ignore[arg-type]


def _acknowledge_fresh_start(options: WriterOptions, session: TransactionSession, args: argparse.Namespace) -> int:
    """The log has no record of the prefix (never used, or its log was lost): a ``reset`` record with no
    history tells the sink that starting afresh is meant, which it otherwise refuses when the prefix's
    coordinator has committed before."""
    if not args.yes:
        print(f"prefix {options.prefix} has no record in {options.decision_log_topic}; with --yes, a reset record "
              "acknowledges a fresh start (replays of epochs decided in a lost log would be written again): "
              "re-run with --yes")
        return EXIT_NOTHING_DONE
    decision_log = DecisionLog(options)
    decision_log.ensure_topic()
    reset = LogRecord("reset", options.prefix, f"reset:{_now_ms()}")
    decision_log.append(reset)
    print(f"appended reset record {reset.epoch_id} for prefix {options.prefix} to {options.decision_log_topic}: "
          "a fresh start, acknowledged")
    recover_prefix(options, session)  # what crashed jobs of the prefix left open would pin the sink's LSO
    return EXIT_OK


def recover_prefix(options: WriterOptions, session: TransactionSession,
                   accept_data_loss: bool = False) -> tuple[bool, RecoveryReport | None]:
    """What the driver's recovery and commit do: fence other drivers, roll the last decision forward,
    then abort and fence every open transaction of the prefix. Prints what it did; returns whether it
    did anything, and the coordinator's report (None when the decision log does not exist). A participant that can no longer be committed is an error, unless
    ``accept_data_loss``: then it is printed."""
    timeout_ms = resolve_transaction_timeout_ms(options)
    decision_log = existing_decision_log(options)
    if decision_log is None:  # no decision was ever taken: nothing to roll forward, nothing to prove
        print(f"nothing to roll forward: {_last_summary(options, decision_log, None)}")
        aborted = abort_lingering(session, options.prefix, timeout_ms, lambda: None)
        rolled, report = False, None
    else:
        report = TwoPhaseCommitCoordinator(options, timeout_ms).recover(accept_data_loss)
        before, aborted = report.last_before, report.aborted
        rolled = before is not None and before.kind == "decision"
        if report.data_loss:
            print(f"DATA LOSS accepted (--accept-data-loss): {report.data_loss}")
        elif rolled and before is not None:
            committed = "; ".join(f"{p.transactional_id} ({p.describe_output()})" for p in before.participants)
            print(f"rolled forward decision {before.epoch_id}: committed {len(before.participants)} participant "
                  f"transaction(s): {committed}; recorded it complete")
        else:
            print(f"nothing to roll forward: {_last_summary(options, decision_log, before)}")
    print(f"aborted {len(aborted)} open transaction(s) of prefix {options.prefix}: {', '.join(aborted)}"
          if aborted else f"no open transactions of prefix {options.prefix}")
    return rolled or bool(aborted), report


def _last_summary(options: WriterOptions, decision_log: DecisionLog | None, last: LogRecord | None) -> str:
    """Why there is nothing to roll forward or reset."""
    if decision_log is None:
        return f"decision log topic {options.decision_log_topic} does not exist"
    if last is None:
        return f"prefix {options.prefix} has no record in {options.decision_log_topic}"
    return f"the last record of prefix {options.prefix} is {last.kind} {last.epoch_id}"


# -- what Kafka says --------------------------------------------------------------------------
def existing_decision_log(options: WriterOptions) -> DecisionLog | None:
    """The decision log, or None when its topic does not exist (the CLI never creates it)."""
    found = _existing_partitions(options, [options.decision_log_topic])
    return DecisionLog(options) if found else None


def _participant_states(session: TransactionSession, record: LogRecord | None) -> Mapping[str, TxnDescription]:
    """Current states of the participants of a decision not recorded complete yet (of no other record:
    once complete, its transactional ids are reused by later epochs)."""
    if record is None or record.kind != "decision" or not record.participants:
        return {}
    return session.describe([p.transactional_id for p in record.participants])


def partition_offsets(options: WriterOptions, topics: Sequence[str]) -> list[PartitionOffsets]:
    """Per partition of ``topics``: the LSO (read_committed latest) and the high watermark."""
    partitions = _existing_partitions(options, topics)
    missing = sorted(set(topics) - {topic for topic, _ in partitions})
    if missing:
        raise KafkaEosCliError(f"topic(s) {', '.join(missing)} do not exist on {options.bootstrap_servers}")
    # High watermark first: traffic between the two requests can then only make the LSO look higher,
    # never flag a partition without an open transaction as pinned.
    written = _lookup(options, topics, "read_uncommitted").latest(partitions)
    stable = _lookup(options, topics, "read_committed").latest(partitions)
    return [PartitionOffsets(t, p, stable[(t, p)], written[(t, p)]) for t, p in sorted(partitions)]


def _existing_partitions(options: WriterOptions, topics: Sequence[str]) -> list[PartitionKey]:
    """The partitions of those of ``topics`` that exist."""
    reader_options = _reader_options(options, topics, "read_committed")
    return KafkaOffsetLookup(reader_options).partitions(reader_options.subscription, must_exist=False)


def _lookup(options: WriterOptions, topics: Sequence[str], isolation: str) -> KafkaOffsetLookup:
    return KafkaOffsetLookup(_reader_options(options, topics, isolation))


def _reader_options(options: WriterOptions, topics: Sequence[str], isolation: str) -> ReaderOptions:
    """Reader options on ``topics`` with the sink's connection, to reuse the reader's offset lookup."""
    subscription = Subscription("subscribe", topics=tuple(dict.fromkeys(t.strip() for t in topics if t.strip())))
    return internal_read_options(options.connection, subscription, isolation)


# -- rendering --------------------------------------------------------------------------------
def record_lines(record: LogRecord | None, now_ms: int, states: Mapping[str, TxnDescription]) -> list[str]:
    """The last decision-log record: kind, epoch, participants, consumer group offsets, time."""
    if record is None:
        return ["last record: none"]
    lines = [f"last record: {record.kind} {record.epoch_id}, written {_utc(record.written_at_ms)} "
             f"({_duration(now_ms - record.written_at_ms)} ago)"]
    for p in record.participants:
        now = states.get(p.transactional_id)
        lines.append(f"  participant {p.transactional_id}: spark partition {p.spark_partition}, producer {p.producer_id} "
                     f"epoch {p.producer_epoch}, {p.describe_output()}" + (f"; now {now.state}" if now else ""))
    if record.consumer_group:
        offsets = ", ".join(f"{t}-{p} -> {o}" for t, p, o in record.offsets) or "none"
        lines.append(f"  consumer group {record.consumer_group}: {offsets}")
    if record.kind == "decision":
        lines.append("  (not recorded complete yet: `recover` or the query's next epoch rolls it forward)")
    return lines


def transaction_lines(transactions: Sequence[TxnDescription], now_ms: int) -> list[str]:
    """One line per open transaction: state, producer id / epoch, age, timeout, partitions."""
    if not transactions:
        return ["open transactions: none"]
    return [f"open transactions: {len(transactions)}"] + [_transaction_line(d, now_ms) for d in transactions]


def _transaction_line(d: TxnDescription, now_ms: int) -> str:
    partitions = ", ".join(f"{t}-{p}" for t, ps in sorted(d.topic_partitions.items()) for p in ps) or "none"
    timing = f"timeout {_duration(d.transaction_timeout_ms)}"
    if d.transaction_start_time_ms >= 0:
        age_ms = now_ms - d.transaction_start_time_ms
        left_ms = max(d.transaction_timeout_ms - age_ms, 0)
        timing = f"started {_duration(age_ms)} ago, {timing} ({_duration(left_ms)} left)"
    return (f"  {d.transactional_id}: {d.state}, producer {d.producer_id} epoch {d.producer_epoch}, "
            f"{timing}, partitions {partitions}")


def offset_lines(offsets: Sequence[PartitionOffsets]) -> list[str]:
    """One line per partition; a partition whose LSO is below its high watermark is flagged PINNED."""
    return [f"topic {o.topic} partition {o.partition}: last stable offset {o.last_stable}, high watermark "
            f"{o.high_watermark}" + (f", PINNED ({o.high_watermark - o.last_stable} offsets held back by an open "
                                     "transaction)" if o.pinned else ", stable") for o in offsets]


def reset_plan(options: WriterOptions, last: LogRecord, transactions: Sequence[TxnDescription]) -> list[str]:
    """What ``reset --yes`` would do."""
    open_ids = ", ".join(d.transactional_id for d in transactions) or "none"
    roll = (f"roll forward decision {last.epoch_id} ({len(last.participants)} participant(s))"
            if last.kind == "decision" else f"nothing to roll forward (last record: {last.kind} {last.epoch_id})")
    return [
        f"reset of prefix {options.prefix} (last record: {last.kind} {last.epoch_id}) would:",
        f"  1. {roll}",
        f"  2. abort every open transaction of the prefix (now: {open_ids})",
        f"  3. append a reset record to {options.decision_log_topic}, so that a new query (new checkpoint) may "
        "use this prefix from micro-batch 0",
        "Do this only when the query that used this prefix is gone for good. Nothing was changed; "
        "re-run with --yes to do it.",
    ]


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _duration(ms: int) -> str:
    seconds = ms / 1000
    return f"{seconds:.1f}s" if seconds < 120 else f"{seconds / 60:.1f}min"


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- errors -----------------------------------------------------------------------------------
def _error_text(err: BaseException) -> str:
    """One line: the message of our own and Kafka's errors, the type too for anything else."""
    if isinstance(err, KafkaException) and err.args and isinstance(err.args[0], KafkaError):
        text = f"Kafka: {err.args[0].str()}"
    elif isinstance(err, ClientCallError):
        text = f"Kafka: {err.error.description}"
    elif isinstance(err, (KafkaEosError, ValueError)):
        text = str(err)
    else:
        text = f"{type(err).__name__}: {err}"
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
