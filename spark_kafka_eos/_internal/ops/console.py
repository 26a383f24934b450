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
(:mod:`spark_kafka_eos._internal.config.command_config`). ``--timeout`` bounds each request (an unreachable cluster fails
within it); librdkafka's and kafka-python's own logs stay off stderr unless ``--verbose``. ``--json``,
``--command-config``, ``--timeout`` and ``--verbose`` go anywhere on the line.

(``python -m spark_kafka_eos.cli`` where the package is importable but its command is not installed.) This module
wires the commands; :mod:`.output` renders what they found, and :mod:`spark_kafka_eos._internal.write.prefix_repair` does what
``recover`` and ``reset`` do to a prefix.

``inspect`` only reads. ``recover`` does what the driver's recovery and commit do: roll the last decision
forward, then abort (and fence) every open transaction of the prefix. ``reset`` recovers, then appends a
``reset`` record so that a new query (a new checkpoint) may reuse the prefix from micro-batch 0.
``lag`` prints a consumer group's offsets against each partition's last stable offset and high
watermark (the sink's ``consumerGroup``, or a stream's ``progressGroup``). ``list`` shows every prefix of a decision
log (:mod:`spark_kafka_eos._internal.ops.prefix_status`); ``exporter`` serves the same as Prometheus metrics
(:mod:`spark_kafka_eos._internal.ops.exporter`).
Options are parsed by :func:`parse_writer_options`, as the sink parses them; secrets are never printed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from spark_kafka_eos._internal.cluster import open_session
from spark_kafka_eos._internal.config.command_config import CommandConfigError, environment_settings, file_settings
from spark_kafka_eos._internal.config.reader import (
    parse_reader_options,
)
from spark_kafka_eos._internal.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log.kafka_log import KafkaDecisionLog
from spark_kafka_eos._internal.decision_log.protocol import DecisionLog
from spark_kafka_eos._internal.error_text import error_text
from spark_kafka_eos._internal.librdkafka_logs import LIBRDKAFKA_LOGGER
from spark_kafka_eos._internal.ops.exporter import KafkaEosCollector, add_exporter_arguments, installed_version, scrape_once, serve
from spark_kafka_eos._internal.ops.output import (
    Output,
    PartitionOffsets,
    lag_lines,
    last_summary,
    offset_lines,
    record_lines,
    reset_plan,
    status_line,
    transaction_json,
    transaction_lines,
)
from spark_kafka_eos._internal.ops.prefix_status import (
    PrefixCatalog,
    decision_log_exists,
    existing_partitions,
    prefix_statuses,
    stable_and_written,
)
from spark_kafka_eos._internal.read.offset_lookup import KafkaOffsetLookup
from spark_kafka_eos._internal.secrets import redact, scrub
from spark_kafka_eos._internal.txn.protocol import TransactionClient
from spark_kafka_eos._internal.write import prefix_repair as repair
from spark_kafka_eos._internal.write.prefix_repair import PrefixRecovery, acknowledge_fresh_start, participant_states, reset_after_recovery
from spark_kafka_eos._internal.write.recovery import open_transactions
from spark_kafka_eos.errors import CommitOutcome, KafkaEosCommitError, KafkaEosError

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

Command = Callable[[WriterOptions, TransactionClient, argparse.Namespace], int]
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
        error = scrub(error_text(err), secrets)
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
def inspect_command(options: WriterOptions, session: TransactionClient, args: argparse.Namespace) -> int:
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
    states = participant_states(session, last)
    transactions = open_transactions(session, options.prefix)
    out.line("\n".join(record_lines(last, now_ms, states)))
    out.line("\n".join(transaction_lines(transactions, now_ms)))
    for line in offset_lines(offsets):
        out.line(line)
    out.set(prefix=options.prefix, decision_log_topic=options.decision_log_topic, decision_log_exists=decision_log is not None,
            last_record=None if last is None else {**json.loads(last.to_json()),
                                                   "participant_states": {tid: d.state for tid, d in states.items()}},
            open_transactions=[transaction_json(d, now_ms) for d in transactions],
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


def recover_command(options: WriterOptions, session: TransactionClient, args: argparse.Namespace) -> int:
    """Roll forward and abort lingering transactions; exit 1 when there was nothing to do."""
    return EXIT_OK if recover_prefix(options, session, args.out).did_anything else EXIT_NOTHING_DONE


def reset_command(options: WriterOptions, session: TransactionClient, args: argparse.Namespace) -> int:
    """Recover, then append a ``reset`` record; without ``--yes`` only say what would happen."""
    out: Output = args.out
    out.set(prefix=options.prefix, reset_record=None)
    decision_log = existing_decision_log(options)
    last = decision_log.last(options.prefix) if decision_log else None
    if last is None:
        return _acknowledge_fresh_start(options, session, args)
    if decision_log is None or last.kind == "reset":
        out.line(f"nothing to reset: {last_summary(options, decision_log is not None, last)}; "
                 "a new query may already use this prefix from micro-batch 0")
        return EXIT_NOTHING_DONE
    if not args.yes:
        plan = reset_plan(options, last, open_transactions(session, options.prefix))
        out.line("\n".join(plan))
        out.set(plan=plan)
        return EXIT_NOTHING_DONE
    # Compare-and-set: the recovery fences the prefix and reads its last record; the reset record is built from
    # that read and appended through the same fenced producer, so no decision can land in between unseen.
    recovery = recover_prefix(options, session, out, accept_data_loss=args.accept_data_loss, decision_log=decision_log)
    before = recovery.last_before
    if before is None or before.kind == "reset":
        out.line(f"nothing to reset: {last_summary(options, decision_log is not None, before)}")
        return EXIT_NOTHING_DONE
    reset = reset_after_recovery(decision_log, recovery)
    if reset.record is None:
        now = reset.found
        written = f"{now.kind} {now.epoch_id}" if now is not None else "nothing it can read (its record is gone)"
        out.line(f"reset refused: while it ran, a driver of prefix {options.prefix} fenced it, and the prefix's last record "
                 f"is now {written}, no longer {before.kind} {before.epoch_id}: a query still runs on the prefix. Nothing "
                 "was reset (what recovery rolled forward or aborted stands, and is safe). Fix: stop that query, then run "
                 "reset again")
        return EXIT_NOTHING_DONE
    moved_back = reset.moved_back
    if moved_back:
        out.line(f"moved consumerGroup {reset.record.consumer_group} back to where the forgotten epoch started: "
                 + ", ".join(f"{t}-{p}: {o}" for (t, p), o in sorted(moved_back.items())))
    out.line(f"appended reset record {reset.record.epoch_id} for prefix {options.prefix} to {options.decision_log_topic}: "
             "a new query may use this prefix from micro-batch 0")
    out.set(reset_record=reset.record.epoch_id, group_moved_back=[{"topic": t, "partition": p, "offset": o}
                                                                  for (t, p), o in sorted((moved_back or {}).items())])
    return EXIT_OK


def _acknowledge_fresh_start(options: WriterOptions, session: TransactionClient, args: argparse.Namespace) -> int:
    """The log has no record of the prefix (never used, or its log was lost): a ``reset`` record with no
    history tells the sink that starting afresh is meant, which it otherwise refuses when the prefix's
    coordinator has committed before."""
    out: Output = args.out
    if not args.yes:
        out.line(f"prefix {options.prefix} has no record in {options.decision_log_topic}; with --yes, a reset record "
                 "acknowledges a fresh start (replays of epochs decided in a lost log would be written again): "
                 "re-run with --yes")
        return EXIT_NOTHING_DONE
    reset = acknowledge_fresh_start(KafkaDecisionLog(options), options.prefix)
    if reset.record is None:
        now = reset.found
        assert now is not None
        out.line(f"reset refused: prefix {options.prefix} has a record now ({now.kind} {now.epoch_id}): a query started "
                 "on it while reset ran. Nothing was reset. Fix: stop that query, then run reset again")
        return EXIT_NOTHING_DONE
    out.line(f"appended reset record {reset.record.epoch_id} for prefix {options.prefix} to {options.decision_log_topic}: "
             "a fresh start, acknowledged")
    out.set(reset_record=reset.record.epoch_id)
    recover_prefix(options, session, out)  # what crashed jobs of the prefix left open would pin the sink's LSO
    return EXIT_OK


def recover_prefix(options: WriterOptions, session: TransactionClient, out: Output, accept_data_loss: bool = False,
                   decision_log: DecisionLog | None = None) -> PrefixRecovery:
    """:func:`~spark_kafka_eos._internal.write.prefix_repair.recover_prefix` on the prefix's decision log (given, or the existing
    one), printing what it did."""
    decision_log = decision_log or existing_decision_log(options)
    out.set(prefix=options.prefix, rolled_forward=None, committed_participants=[], data_loss=None)
    if decision_log is None:  # no decision was ever taken: nothing to roll forward, nothing to prove
        out.line(f"nothing to roll forward: {last_summary(options, decision_log is not None, None)}")
    recovery = repair.recover_prefix(options, session, decision_log, accept_data_loss)
    before, report = recovery.last_before, recovery.report
    if report is not None and report.data_loss:
        out.line(f"DATA LOSS accepted (--accept-data-loss): {report.data_loss}")
        out.set(data_loss=str(report.data_loss))
    elif recovery.rolled_forward and before is not None:
        committed = "; ".join(f"{p.transactional_id} ({p.describe_output()})" for p in before.participants)
        out.line(f"rolled forward decision {before.epoch_id}: committed {len(before.participants)} participant "
                 f"transaction(s): {committed}; recorded it complete")
        out.set(rolled_forward=before.epoch_id, committed_participants=[p.transactional_id for p in before.participants])
    elif decision_log is not None:
        out.line(f"nothing to roll forward: {last_summary(options, decision_log is not None, before)}")
    aborted = recovery.aborted
    out.line(f"aborted {len(aborted)} open transaction(s) of prefix {options.prefix}: {', '.join(aborted)}"
             if aborted else f"no open transactions of prefix {options.prefix}")
    out.set(aborted=list(aborted))
    return recovery


# -- what Kafka says --------------------------------------------------------------------------
def existing_decision_log(options: WriterOptions) -> DecisionLog | None:
    """The decision log, or None when its topic does not exist (the CLI never creates it)."""
    return KafkaDecisionLog(options) if decision_log_exists(options) else None


def partition_offsets(options: WriterOptions, topics: Sequence[str]) -> list[PartitionOffsets]:
    """Per partition of ``topics``: the LSO (read_committed latest) and the high watermark."""
    partitions = existing_partitions(options, topics)
    missing = sorted(set(topics) - {topic for topic, _ in partitions})
    if missing:
        raise KafkaEosCliError(f"topic(s) {', '.join(missing)} do not exist on {options.bootstrap_servers}")
    offsets = stable_and_written(options, partitions)
    return [PartitionOffsets(t, p, *offsets[(t, p)]) for t, p in sorted(partitions)]


def _now_ms() -> int:
    return int(time.time() * 1000)

