"""Inspect and repair a transactional id prefix of the ``kafka_eos`` sink.

    kafka-eos inspect --bootstrap-servers B --prefix P [--topic T ...]
    kafka-eos recover --bootstrap-servers B --prefix P
    kafka-eos reset   --bootstrap-servers B --prefix P [--yes]
    kafka-eos lag     --bootstrap-servers B --group G --topic T [--topic T ...]
    kafka-eos list    --bootstrap-servers B [--decision-log-topic T]
    kafka-eos exporter --bootstrap-servers B [--group G ...] [--port 10464]

Every command takes ``--json``: one JSON object on stdout instead of the text (with ``exit_code``, and ``error``
when it failed). Client settings (security, secrets) come, lowest first, from ``--command-config FILE`` (a Java
properties file, as Kafka's tools take), ``KAFKA_EOS_KAFKA_*`` environment variables and ``--kafka KEY=VALUE``
(:mod:`spark_kafka_eos.config.command_config`). ``--timeout`` bounds each request (an unreachable cluster fails
within it); librdkafka's and kafka-python's own logs stay off stderr unless ``--verbose``. ``--json``,
``--command-config``, ``--timeout`` and ``--verbose`` go anywhere on the line.

(``python -m spark_kafka_eos.cli`` where the package is importable but its command is not installed.)

``inspect`` only reads. ``recover`` does what the driver's recovery and commit do: roll the last decision
forward, then abort (and fence) every open transaction of the prefix. ``reset`` recovers, then appends a
``reset`` record so that a new query (a new checkpoint) may reuse the prefix from micro-batch 0.
``lag`` prints a consumer group's offsets against each partition's last stable offset and high
watermark (the sink's ``consumerGroup``, or a stream's ``progressGroup``). ``list`` shows every prefix of a decision
log (:mod:`spark_kafka_eos.prefix_status`); ``exporter`` serves the same as Prometheus metrics
(:mod:`spark_kafka_eos.exporter`).
Options are parsed by :func:`parse_writer_options`, as the sink parses them; secrets are never printed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone

from confluent_kafka import KafkaError, KafkaException

from spark_kafka_eos.client_errors import ClientCallError
from spark_kafka_eos.cluster import open_session
from spark_kafka_eos.config.command_config import CommandConfigError, environment_settings, file_settings
from spark_kafka_eos.config.librdkafka import LIBRDKAFKA_LOGGER
from spark_kafka_eos.config.reader import (
    PartitionKey,
    parse_reader_options,
)
from spark_kafka_eos.config.secrets import redact, scrub
from spark_kafka_eos.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos.errors import CommitOutcome, KafkaEosCommitError, KafkaEosDecisionLogError, KafkaEosError
from spark_kafka_eos.exporter import KafkaEosCollector, add_exporter_arguments, installed_version, scrape_once, serve
from spark_kafka_eos.prefix_status import (
    PrefixCatalog,
    PrefixStatus,
    decision_log_exists,
    existing_partitions,
    prefix_statuses,
    stable_and_written,
)
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
"""A command on the cluster alone (``lag``, ``list``, ``exporter``)."""
LIST_PREFIX = "kafka-eos-list"
"""The prefix the cluster commands parse the sink's options with: they read the decision log, never write."""

_EPILOG = """\
exit codes: 0 done (inspect, lag: always; list: prefixes listed), 1 refused or nothing to do (list: no prefix),
2 error (one line on stderr), 3 an epoch is committed but not all of it visible yet (run recover again),
4 an epoch's outcome is unknown. With --json, the same codes, and one JSON object on stdout.
recover and reset abort every open transaction of the prefix: run them only when the query that
uses the prefix is stopped (a running query would see its current epoch aborted)."""


class KafkaEosCliError(KafkaEosError):
    """A problem the command line tool reports as one line on stderr."""


class Output:
    """What a command reports: text lines on stdout, or, with ``--json``, its fields as one JSON object at the end."""

    def __init__(self, command: str, as_json: bool) -> None:
        self.as_json = as_json
        self.fields: dict[str, object] = {"command": command}

    def line(self, text: str) -> None:
        if not self.as_json:
            print(text)

    def set(self, **fields: object) -> None:
        self.fields.update(fields)

    def finish(self, exit_code: int) -> int:
        if self.as_json:
            print(json.dumps({**self.fields, "exit_code": exit_code}))
        return exit_code


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
    args.out = Output(args.command.__name__.removesuffix("_command"), args.json)
    secrets: dict[str, str] = dict(args.kafka)
    try:
        with _client_logs(args.verbose):
            args.settings = secrets = client_settings(args)
            if getattr(args, "prefix", None) is None:  # lag, list, exporter: the cluster, no prefix
                return args.out.finish(args.command(args))
            options = writer_options(args)
            with open_session(options.connection) as session:
                command: Command = args.command
                return args.out.finish(command(options, session, args))
    except Exception as err:  # every failure is one line on stderr, never a traceback
        error = scrub(_error_text(err), secrets)
        print(f"error: {error}", file=sys.stderr)
        args.out.set(error=error)
        return args.out.finish(_EXIT_BY_OUTCOME[err.outcome] if isinstance(err, KafkaEosCommitError) else EXIT_ERROR)


_CLIENT_LOGGERS = (LIBRDKAFKA_LOGGER, logging.getLogger("kafka"))
DEFAULT_TIMEOUT_S = 30.0


@contextmanager
def _client_logs(verbose: bool) -> Iterator[None]:
    """librdkafka's and kafka-python's own log lines: off (the command's error says what failed, in one line), or
    with ``--verbose`` on stderr from INFO up."""
    before = [(logger, logger.level, logger.disabled) for logger in _CLIENT_LOGGERS]
    handler = logging.StreamHandler(sys.stderr) if verbose else None
    for logger in _CLIENT_LOGGERS:
        logger.disabled = not verbose
        if handler is not None:
            logger.setLevel(logging.INFO)
            logger.addHandler(handler)
    try:
        yield
    finally:
        for logger, level, disabled in before:
            logger.setLevel(level)
            logger.disabled = disabled
            if handler is not None:
                logger.removeHandler(handler)


def client_settings(args: argparse.Namespace) -> dict[str, str]:
    """The client settings of this run: ``--command-config`` file, then ``KAFKA_EOS_KAFKA_*`` variables, then
    ``--kafka``, each over the one before; ``--timeout`` as the request timeout unless one of them set it."""
    settings: dict[str, str] = {}
    if args.command_config:
        try:
            settings.update(file_settings(args.command_config))
        except CommandConfigError as err:
            raise KafkaEosCliError(str(err)) from None
    settings.update(environment_settings(os.environ))
    settings.update(dict(args.kafka))
    if args.timeout <= 0:
        raise KafkaEosCliError(f"--timeout must be above 0 seconds, not {args.timeout:g}")
    settings.setdefault("socket.timeout.ms", str(int(args.timeout * 1000)))
    return settings


PROGRAM = "kafka-eos"
"""The name the CLI gives itself in its help and usage, whichever way it was started."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``kafka-eos`` command (also ``python -m spark_kafka_eos.cli``)."""
    cluster = argparse.ArgumentParser(add_help=False)
    cluster.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT[,...]", help="the Kafka cluster")
    cluster.add_argument("--kafka", action="append", default=[], type=_setting, metavar="KEY=VALUE",
                         help="a librdkafka client setting, as the sink's kafka.* options (security etc.); repeatable; "
                         "over --command-config and KAFKA_EOS_KAFKA_* variables (which keep secrets off the command line)")
    _add_anywhere_options(cluster, argparse.SUPPRESS)
    log_topic = argparse.ArgumentParser(add_help=False, parents=[cluster])
    log_topic.add_argument("--decision-log-topic", metavar="TOPIC",
                           help="the sink's decisionLogTopic option (default: _kafka_eos_decisions)")
    common = argparse.ArgumentParser(add_help=False, parents=[log_topic])
    common.add_argument("--prefix", required=True, help="the transactional.id.prefix of the sink")
    parser = argparse.ArgumentParser(prog=PROGRAM, epilog=_EPILOG,
                                     description="Inspect and repair a transactional id prefix of the kafka_eos sink.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROGRAM} {installed_version()}")
    _add_anywhere_options(parser, None)
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
    _add_command(commands, log_topic, list_command, "show every prefix of the decision log: its owner, last epoch and "
                 "age, state, open transactions (the oldest one's age against its timeout) and the LSO lag of the "
                 "partitions its last decision wrote to")
    exporter_parser = _add_command(commands, log_topic, exporter_command, "serve Prometheus metrics of every prefix of "
                                   "the decision log and of --group(s), computed at each scrape")
    add_exporter_arguments(exporter_parser)
    return parser


def _add_anywhere_options(parser: argparse.ArgumentParser, suppressed: str | None) -> None:
    """Options taken before or after the command: the command's parser must not put back their defaults over what
    the main parser read (``argparse.SUPPRESS``)."""
    def default(value: object) -> object:
        return suppressed if suppressed is not None else value

    parser.add_argument("--json", action="store_true", default=default(False), help="print one JSON object instead of text")
    parser.add_argument("--command-config", metavar="FILE", default=default(None),
                        help="client settings in a Java properties file, as Kafka's tools take (PLAIN and SCRAM "
                        "sasl.jaas.config lines become sasl.username and sasl.password)")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", default=default(DEFAULT_TIMEOUT_S),
                        help=f"each request's timeout: an unreachable cluster fails within it (default {DEFAULT_TIMEOUT_S:g}; "
                        "a socket.timeout.ms client setting wins)")
    parser.add_argument("--verbose", action="store_true", default=default(False),
                        help="also print librdkafka's and kafka-python's own log lines on stderr")


def _add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser,
                 command: Command | ClusterCommand, summary: str) -> argparse.ArgumentParser:
    name = command.__name__.removesuffix("_command")
    sub = commands.add_parser(name, parents=[common], help=summary, description=summary[0].upper() + summary[1:] + ".",
                              epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub.set_defaults(command=command)
    return sub


def writer_options(args: argparse.Namespace) -> WriterOptions:
    """The sink's options for this prefix (a placeholder for the cluster commands), parsed as the sink parses them."""
    settings: dict[str, str] = dict(getattr(args, "settings", None) or client_settings(args))
    if "bootstrap.servers" in settings:
        raise KafkaEosCliError("give the brokers with --bootstrap-servers, not --kafka bootstrap.servers=...")
    options = {f"kafka.{key}": value for key, value in settings.items()}
    prefix = getattr(args, "prefix", None) or LIST_PREFIX
    options.update({"kafka.bootstrap.servers": args.bootstrap_servers, "transactional.id.prefix": prefix})
    if getattr(args, "decision_log_topic", None) is not None:
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
    out: Output = args.out
    now_ms = _now_ms()
    offsets = partition_offsets(options, args.topic) if args.topic else []
    decision_log = existing_decision_log(options)
    out.line(f"prefix {options.prefix} on {options.bootstrap_servers}, decision log topic {options.decision_log_topic}"
             + ("" if decision_log else " (does not exist)"))
    if options.kafka_config:
        out.line(f"client settings: {redact(options.kafka_config)}")
    last = decision_log.last(options.prefix) if decision_log else None
    states = _participant_states(session, last)
    transactions = open_transactions(session, options.prefix)
    out.line("\n".join(record_lines(last, now_ms, states)))
    out.line("\n".join(transaction_lines(transactions, now_ms)))
    for line in offset_lines(offsets):
        out.line(line)
    out.set(prefix=options.prefix, decision_log_topic=options.decision_log_topic, decision_log_exists=decision_log is not None,
            last_record=None if last is None else {**json.loads(last.to_json()),
                                                   "participant_states": {tid: d.state for tid, d in states.items()}},
            open_transactions=[_transaction_json(d, now_ms) for d in transactions],
            partitions=[{"topic": o.topic, "partition": o.partition, "last_stable_offset": o.last_stable,
                         "high_watermark": o.high_watermark, "pinned": o.pinned} for o in offsets])
    return EXIT_OK


def lag_command(args: argparse.Namespace) -> int:
    """Per partition: the group's offset, the LSO, the high watermark and the lag (LSO - group offset)."""
    options = {f"kafka.{key}": value for key, value in args.settings.items()}
    options.update({"kafka.bootstrap.servers": args.bootstrap_servers, "subscribe": ",".join(args.topic)})
    reader_options = parse_reader_options(options, streaming=False)
    lookup = KafkaOffsetLookup(reader_options)
    partitions = lookup.partitions(reader_options.subscription, must_exist=True)
    written, stable = lookup.log_end(partitions), lookup.latest(partitions)
    committed = lookup.committed(args.group, partitions)
    rows = [(tp, committed.get(tp), stable[tp], written[tp]) for tp in sorted(partitions)]
    for line in lag_lines(args.group, rows):
        args.out.line(line)
    lags = [None if offset is None else max(lso - offset, 0) for _, offset, lso, _ in rows]
    args.out.set(group=args.group, total_lag=sum(lag or 0 for lag in lags), partitions=[
        {"topic": t, "partition": p, "group_offset": offset, "last_stable_offset": lso, "high_watermark": hw, "lag": lag}
        for ((t, p), offset, lso, hw), lag in zip(rows, lags)])
    return EXIT_OK


def list_command(args: argparse.Namespace) -> int:
    """Every prefix of the decision log, one line each (``--json``: :meth:`PrefixStatus.as_json`)."""
    options = writer_options(args)
    decision_log = existing_decision_log(options)
    statuses = []
    if decision_log is not None:
        with open_session(options.connection) as session:
            statuses = prefix_statuses(options, session, PrefixCatalog(options).refresh())
    args.out.set(decision_log_topic=options.decision_log_topic, decision_log_exists=decision_log is not None,
                 prefixes=[status.as_json() for status in statuses])
    if decision_log is None:
        args.out.line(f"decision log topic {options.decision_log_topic} does not exist on {options.bootstrap_servers}")
        return EXIT_NOTHING_DONE
    args.out.line(f"{len(statuses)} prefix(es) in decision log topic {options.decision_log_topic}")
    for status in statuses:
        args.out.line(status_line(status))
    return EXIT_OK if statuses else EXIT_NOTHING_DONE


def lag_lines(group: str, rows: Sequence[tuple[PartitionKey, int | None, int, int]]) -> list[str]:
    """One line per partition, and the total; a partition without a group offset has no lag figure."""
    lines, total = [], 0
    for (topic, partition), offset, stable, written in rows:
        lag = None if offset is None else max(stable - offset, 0)
        total += lag or 0
        lines.append(f"topic {topic} partition {partition}: group offset {'none' if offset is None else offset}, "
                     f"last stable offset {stable}, high watermark {written}, lag {'-' if lag is None else lag}")
    return lines + [f"group {group}: total lag {total}"]


def exporter_command(args: argparse.Namespace) -> int:
    """Serve the metrics until interrupted (``--once``: print one scrape)."""
    options = writer_options(args)
    collector = KafkaEosCollector(options, args.group, args.scrape_timeout)
    if args.once:
        try:
            args.out.line(scrape_once(collector).rstrip("\n"))
        finally:
            collector.close()
        args.out.set(samples=[{"name": s.name, "labels": s.labels, "value": s.value}
                              for family in collector.last_scrape for s in family.samples])
        if collector.last_error is not None:  # the scrape says kafka_eos_exporter_up 0; the exit code says it too
            raise KafkaEosCliError(f"the scrape could not read the cluster: {collector.last_error}")
        return EXIT_OK
    serve(collector, args.port, args.address, lambda: args.out.line(
        f"serving kafka_eos metrics of {options.decision_log_topic} on http://{args.address}:{args.port}/metrics"))
    return EXIT_OK


def recover_command(options: WriterOptions, session: TransactionSession, args: argparse.Namespace) -> int:
    """Roll forward and abort lingering transactions; exit 1 when there was nothing to do."""
    return EXIT_OK if recover_prefix(options, session, args.out)[0] else EXIT_NOTHING_DONE


def reset_command(options: WriterOptions, session: TransactionSession, args: argparse.Namespace) -> int:
    """Recover, then append a ``reset`` record; without ``--yes`` only say what would happen."""
    out: Output = args.out
    out.set(prefix=options.prefix, reset_record=None)
    decision_log = existing_decision_log(options)
    last = decision_log.last(options.prefix) if decision_log else None
    if last is None:
        return _acknowledge_fresh_start(options, session, args)
    if decision_log is None or last.kind == "reset":
        out.line(f"nothing to reset: {_last_summary(options, decision_log, last)}; "
                 "a new query may already use this prefix from micro-batch 0")
        return EXIT_NOTHING_DONE
    if not args.yes:
        plan = reset_plan(options, last, open_transactions(session, options.prefix))
        out.line("\n".join(plan))
        out.set(plan=plan)
        return EXIT_NOTHING_DONE
    # Compare-and-set: the recovery fences the prefix and reads its last record; the reset record is built from
    # that read and appended through the same fenced producer, so no decision can land in between unseen.
    _, report = recover_prefix(options, session, out, accept_data_loss=args.accept_data_loss, decision_log=decision_log)
    before = report.last_before if report is not None else None
    if before is None or before.kind == "reset":
        out.line(f"nothing to reset: {_last_summary(options, decision_log, before)}")
        return EXIT_NOTHING_DONE
    now = decision_log.fenced_last(options.prefix)  # the recovery's fence, unless its producer had to be replaced
    if now is None or now.epoch_id != before.epoch_id:
        written = f"{now.kind} {now.epoch_id}" if now is not None else "nothing it can read (its record is gone)"
        out.line(f"reset refused: while it ran, a driver of prefix {options.prefix} fenced it, and the prefix's last record "
                 f"is now {written}, no longer {before.kind} {before.epoch_id}: a query still runs on the prefix. Nothing "
                 "was reset (what recovery rolled forward or aborted stands, and is safe). Fix: stop that query, then run "
                 "reset again")
        return EXIT_NOTHING_DONE
    reset = reset_record(before, report)
    moved_back = {(t, p): o for t, p, o in reset.offsets} if reset.consumer_group else None
    _append_reset(decision_log, reset, moved_back)
    if moved_back:
        out.line(f"moved consumerGroup {reset.consumer_group} back to where the forgotten epoch started: "
                 + ", ".join(f"{t}-{p}: {o}" for (t, p), o in sorted(moved_back.items())))
    out.line(f"appended reset record {reset.epoch_id} for prefix {options.prefix} to {options.decision_log_topic}: "
             "a new query may use this prefix from micro-batch 0")
    out.set(reset_record=reset.epoch_id, group_moved_back=[{"topic": t, "partition": p, "offset": o}
                                                           for (t, p), o in sorted((moved_back or {}).items())])
    return EXIT_OK


def _append_reset(decision_log: DecisionLog, reset: LogRecord, moved_back: dict[tuple[str, int], int] | None) -> None:
    """Append ``reset`` through the log's fenced producer: it fails if another driver fenced this one since."""
    try:
        decision_log.append(reset, moved_back)
    except (KafkaEosDecisionLogError, KafkaException) as err:
        raise KafkaEosDecisionLogError(
            f"The reset record of prefix {reset.prefix} was not appended, or its outcome is unknown ({_error_text(err)}): another "
            "driver may have fenced this reset (a query still runs on the prefix), or the broker did not answer. "
            f"Fix: stop any query on the prefix; `kafka-eos inspect --prefix {reset.prefix}` shows whether its last record "
            "is the reset; if not, run reset again (a reset is safe to repeat)") from err


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
    out: Output = args.out
    if not args.yes:
        out.line(f"prefix {options.prefix} has no record in {options.decision_log_topic}; with --yes, a reset record "
                 "acknowledges a fresh start (replays of epochs decided in a lost log would be written again): "
                 "re-run with --yes")
        return EXIT_NOTHING_DONE
    decision_log = DecisionLog(options)
    decision_log.ensure_topic()
    now = decision_log.fenced_last(options.prefix)  # appended through this fence: nothing lands in between unseen
    if now is not None:
        out.line(f"reset refused: prefix {options.prefix} has a record now ({now.kind} {now.epoch_id}): a query started "
                 "on it while reset ran. Nothing was reset. Fix: stop that query, then run reset again")
        return EXIT_NOTHING_DONE
    reset = LogRecord("reset", options.prefix, f"reset:{_now_ms()}")
    _append_reset(decision_log, reset, None)
    out.line(f"appended reset record {reset.epoch_id} for prefix {options.prefix} to {options.decision_log_topic}: "
             "a fresh start, acknowledged")
    out.set(reset_record=reset.epoch_id)
    recover_prefix(options, session, out)  # what crashed jobs of the prefix left open would pin the sink's LSO
    return EXIT_OK


def recover_prefix(options: WriterOptions, session: TransactionSession, out: Output, accept_data_loss: bool = False,
                   decision_log: DecisionLog | None = None) -> tuple[bool, RecoveryReport | None]:
    """What the driver's recovery and commit do: fence other drivers, roll the last decision forward,
    then abort and fence every open transaction of the prefix. Prints what it did; returns whether it
    did anything, and the coordinator's report (None when the decision log does not exist). A participant that
    can no longer be committed is an error, unless ``accept_data_loss``: then it is printed. Given a
    ``decision_log``, the recovery fences through it, which then holds the fence (for ``reset``)."""
    timeout_ms = resolve_transaction_timeout_ms(options)
    decision_log = decision_log or existing_decision_log(options)
    out.set(prefix=options.prefix, rolled_forward=None, committed_participants=[], data_loss=None)
    if decision_log is None:  # no decision was ever taken: nothing to roll forward, nothing to prove
        out.line(f"nothing to roll forward: {_last_summary(options, decision_log, None)}")
        aborted = abort_lingering(session, options.prefix, timeout_ms, lambda _: None)
        rolled, report = False, None
    else:
        report = TwoPhaseCommitCoordinator(options, timeout_ms).recover(accept_data_loss, decision_log)
        before, aborted = report.last_before, report.aborted
        rolled = before is not None and before.kind == "decision"
        if report.data_loss:
            out.line(f"DATA LOSS accepted (--accept-data-loss): {report.data_loss}")
            out.set(data_loss=str(report.data_loss))
        elif rolled and before is not None:
            committed = "; ".join(f"{p.transactional_id} ({p.describe_output()})" for p in before.participants)
            out.line(f"rolled forward decision {before.epoch_id}: committed {len(before.participants)} participant "
                     f"transaction(s): {committed}; recorded it complete")
            out.set(rolled_forward=before.epoch_id, committed_participants=[p.transactional_id for p in before.participants])
        else:
            out.line(f"nothing to roll forward: {_last_summary(options, decision_log, before)}")
    out.line(f"aborted {len(aborted)} open transaction(s) of prefix {options.prefix}: {', '.join(aborted)}"
             if aborted else f"no open transactions of prefix {options.prefix}")
    out.set(aborted=list(aborted))
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
    return DecisionLog(options) if decision_log_exists(options) else None


def _participant_states(session: TransactionSession, record: LogRecord | None) -> Mapping[str, TxnDescription]:
    """Current states of the participants of a decision not recorded complete yet (of no other record:
    once complete, its transactional ids are reused by later epochs)."""
    if record is None or record.kind != "decision" or not record.participants:
        return {}
    return session.describe([p.transactional_id for p in record.participants])


def partition_offsets(options: WriterOptions, topics: Sequence[str]) -> list[PartitionOffsets]:
    """Per partition of ``topics``: the LSO (read_committed latest) and the high watermark."""
    partitions = existing_partitions(options, topics)
    missing = sorted(set(topics) - {topic for topic, _ in partitions})
    if missing:
        raise KafkaEosCliError(f"topic(s) {', '.join(missing)} do not exist on {options.bootstrap_servers}")
    offsets = stable_and_written(options, partitions)
    return [PartitionOffsets(t, p, *offsets[(t, p)]) for t, p in sorted(partitions)]


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


def _transaction_json(d: TxnDescription, now_ms: int) -> dict[str, object]:
    age_ms = now_ms - d.transaction_start_time_ms if d.transaction_start_time_ms >= 0 else None
    return {"transactional_id": d.transactional_id, "state": d.state, "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch, "timeout_ms": d.transaction_timeout_ms, "age_ms": age_ms,
            "partitions": [{"topic": t, "partition": p} for t, ps in sorted(d.topic_partitions.items()) for p in ps]}


def status_line(status: PrefixStatus) -> str:
    """One prefix of ``list``: state, owner, last epoch and age, open transactions, LSO lag."""
    oldest = status.oldest_open
    opened = ("no open transactions" if oldest is None else
              f"{len(status.open_transactions)} open, oldest {_duration(oldest.age_ms)} of its {_duration(oldest.timeout_ms)} "
              f"timeout ({oldest.transactional_id})")
    lag = sum(p.lso_lag for p in status.sink_partitions)
    pinned = [f"{p.topic}-{p.partition}" for p in status.sink_partitions if p.lso_lag]
    return (f"{status.prefix}: {status.state}, {status.owner}, last epoch {status.last_epoch} "
            f"({_duration(status.age_ms)} ago); {opened}; sink LSO lag {lag}"
            + (f" ({', '.join(pinned)})" if pinned else ""))


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
