"""``kafka-eos exporter``: Prometheus metrics of every prefix of a decision log and of consumer groups, computed at
each scrape (a prometheus-client collector), as kafka-lag-exporter and Burrow serve lag.

Per prefix: the last record's age and state, open transactions and the oldest one's age, timeout and headroom, and
per partition its last decision wrote to, the last stable offset, the high watermark and their difference. Per
consumer group (each ``--group``, and each ``consumerGroup`` a prefix's last record names): each partition's
committed offset and its lag behind the last stable offset. A scrape reads only
what the decision log gained since the last one (:class:`~spark_kafka_eos._internal.ops.prefix_status.PrefixCatalog`), so its
cost grows with the open transactions and sink partitions, not with the log's history. A scrape that fails says so
in ``kafka_eos_exporter_up 0`` rather than with stale figures, within the scrape timeout (8 s by default, below
Prometheus's default 10 s): a read still running then goes on in the background, and the next scrape takes its
figures if it has finished, with ``kafka_eos_exporter_figures_age_seconds`` saying how old they are.

The series follow Prometheus's conventions: no label whose value changes with each epoch or owner (``kafka-eos list``
shows those), ``_total`` only on counters, a ``kafka_eos_build_info``. The default port, 10464, lies outside the
range Prometheus allocated to exporters (9100-9999, all taken) and is no well-known exporter's.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions

from spark_kafka_eos._internal.cluster import admin_client, open_session
from spark_kafka_eos._internal.config.writer import WriterOptions
from spark_kafka_eos._internal.decision_log.records import REPLAY_PROOFS
from spark_kafka_eos._internal.ops.prefix_status import (
    PREFIX_STATES,
    PrefixCatalog,
    PrefixStatus,
    decision_log_exists,
    last_stable,
    prefix_statuses,
)
from spark_kafka_eos._internal.txn.session import TransactionSession
from spark_kafka_eos.errors import KafkaEosError

log = logging.getLogger(__name__)

DEFAULT_PORT = 10464
DEFAULT_SCRAPE_TIMEOUT_S = 8.0
_GROUP_TIMEOUT_S = 30.0


def add_exporter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", action="append", default=[], metavar="GROUP",
                        help="also export this consumer group's lag against the LSO (a sink's consumerGroup, a stream's "
                        "progressGroup); repeatable")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the HTTP port of /metrics (default {DEFAULT_PORT})")
    parser.add_argument("--address", default="127.0.0.1", help="the address to listen on (default 127.0.0.1; 0.0.0.0 for all)")
    parser.add_argument("--once", action="store_true", help="print one scrape on stdout and exit, instead of serving")
    parser.add_argument("--scrape-timeout", type=float, default=DEFAULT_SCRAPE_TIMEOUT_S, metavar="SECONDS",
                        help="a scrape answers within this, with kafka_eos_exporter_up 0 if the cluster has not "
                        f"(default {DEFAULT_SCRAPE_TIMEOUT_S:g}: below Prometheus's default scrape_timeout of 10 s)")


def require_prometheus_client() -> None:
    """Refuse, saying how to install it, when the optional prometheus-client is missing."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise KafkaEosError("kafka-eos exporter needs prometheus-client: pip install 'spark-kafka-eos[exporter]'") from None


def serve(collector: KafkaEosCollector, port: int, address: str, on_start: Callable[[], None]) -> None:
    """Serve ``/metrics`` of ``collector`` on ``address``:``port`` until interrupted (Ctrl-C, SIGINT)."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server, thread = start_http_server(port, address, registry)
    on_start()
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        thread.join(5)
        collector.close()


def scrape_once(collector: KafkaEosCollector) -> str:
    """One scrape, in Prometheus' text format."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode()


class KafkaEosCollector:
    """Computes every metric at each scrape."""

    def __init__(self, options: WriterOptions, groups: Sequence[str], scrape_timeout_s: float = DEFAULT_SCRAPE_TIMEOUT_S) -> None:
        require_prometheus_client()
        self._options = options
        self._groups = tuple(groups)
        self._catalog = PrefixCatalog(options)
        self._scrape_timeout_s = scrape_timeout_s
        self._lock = threading.Lock()
        self._reading: tuple[Future[list[Any]], float] | None = None
        """The cluster read under way, and when it started (one at a time: a slow one is waited for, not doubled)."""
        self.last_scrape: list[Any] = []
        self.last_error: str | None = None
        """Why the last scrape could not read the cluster (None: it could)."""
        self._session: TransactionSession | None = None

    def _txn_session(self) -> TransactionSession:
        """One session for every scrape: it keeps its connections and the coordinators it found."""
        if self._session is None:
            self._session = open_session(self._options.connection)
        return self._session

    def close(self) -> None:
        self._close_session()

    def _close_session(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def _start_read(self) -> Future[list[Any]]:
        """Read the cluster on a daemon thread: a read that hangs never holds up the end of the process."""
        figures: Future[list[Any]] = Future()

        def read() -> None:
            try:
                figures.set_result(self._families())
            except BaseException as err:  # noqa: BLE001 - handed to the scrape that waits for it
                figures.set_exception(err)

        threading.Thread(target=read, name="kafka-eos-scrape", daemon=True).start()
        return figures

    def _read(self) -> tuple[list[Any], float]:
        """The figures of the cluster read under way (started now if none is), and when that read started; raises
        FutureTimeout when it is not done within the scrape timeout (it goes on, for the next scrape)."""
        if self._reading is None:
            self._reading = (self._start_read(), time.monotonic())
        reading, started = self._reading
        families = reading.result(self._scrape_timeout_s)
        self._reading = None
        return families, started

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        with self._lock:  # two scrapes at once would read the log twice for nothing
            began = time.monotonic()
            started = began
            try:
                families, started = self._read()
                up, self.last_error = 1.0, None
            except FutureTimeout:
                families, up = [], 0.0
                self.last_error = (f"the cluster did not answer within the scrape timeout ({self._scrape_timeout_s:g} s); "
                                   "the read goes on for the next scrape")
                log.warning("A kafka_eos scrape: %s", self.last_error)
            except Exception as err:  # noqa: BLE001 - a failed scrape is a metric, not a crash of the exporter
                log.warning("A kafka_eos scrape failed: %s", err)
                families, up, self.last_error = [], 0.0, str(err)
                self._reading = None
                self._close_session()  # the next scrape starts a new session
            ended = time.monotonic()
            families.append(GaugeMetricFamily("kafka_eos_exporter_up", "1 when the last scrape read the cluster", value=up))
            families.append(GaugeMetricFamily("kafka_eos_exporter_scrape_duration_seconds", "time the last scrape took",
                                              value=ended - began))
            if up:
                families.append(GaugeMetricFamily("kafka_eos_exporter_figures_age_seconds", "how long ago the read of "
                                                  "the cluster these figures come from started", value=ended - started))
            build = GaugeMetricFamily("kafka_eos_build_info", "the installed spark-kafka-eos (value 1)", labels=["version"])
            build.add_metric([installed_version()], 1)
            families.append(build)
            self.last_scrape = list(families)
        yield from families

    def _families(self) -> list[Any]:
        statuses: list[PrefixStatus] = []
        if decision_log_exists(self._options):
            statuses = prefix_statuses(self._options, self._txn_session(), self._catalog.refresh())
        prefixes = _gauge("prefixes", "prefixes with a record in the decision log", ["decision_log_topic"])
        prefixes.add_metric([self._options.decision_log_topic], len(statuses))
        state = _gauge("prefix_state", "1 for the state the prefix is in, 0 for the others", ["prefix", "state"])
        age = _gauge("prefix_last_record_age_seconds", "time since the prefix's last decision-log record", ["prefix"])
        unfinished = _gauge("prefix_decided_not_finished", "1 while the last record is a decision not recorded complete", ["prefix"])
        opened = _gauge("prefix_open_transactions", "open transactions of the prefix", ["prefix"])
        oldest = _gauge("prefix_oldest_open_transaction_age_seconds", "age of the prefix's oldest open transaction (0: none)", ["prefix"])
        timeout = _gauge("prefix_oldest_open_transaction_timeout_seconds", "its transaction timeout", ["prefix"])
        headroom = _gauge("prefix_oldest_open_transaction_headroom_seconds", "time left before the broker aborts it", ["prefix"])
        proof = _gauge("prefix_replay_proof", "1 for what proves a replay of the prefix's last epoch the same input "
                       "(offset_log: Spark's offset log; digest: the rows' digest alone), 0 for the others", ["prefix", "proof"])
        labels = ["prefix", "topic", "partition"]
        stable = _gauge("sink_partition_last_stable_offset", "last stable offset of a partition the last decision wrote to", labels)
        written = _gauge("sink_partition_high_watermark", "high watermark of that partition", labels)
        pinned = _gauge("sink_partition_lso_lag", "high watermark minus last stable offset: records not yet readable", labels)
        source_stable = _gauge("source_partition_last_stable_offset", "last stable offset of a partition the prefix's "
                               "decisions consumed (a read_committed stream reads no further)", labels)
        source_written = _gauge("source_partition_high_watermark", "high watermark of that partition", labels)
        source_pinned = _gauge("source_partition_lso_lag", "high watermark minus last stable offset: records an open "
                               "transaction holds back from the prefix's stream", labels)
        for s in statuses:
            for each in PREFIX_STATES:
                state.add_metric([s.prefix, each], 1 if s.state == each else 0)
            age.add_metric([s.prefix], s.age_ms / 1000)
            for kind in REPLAY_PROOFS:
                proof.add_metric([s.prefix, kind], 1 if s.replay_proof == kind else 0)
            unfinished.add_metric([s.prefix], 1 if s.state == "decided-not-finished" else 0)
            opened.add_metric([s.prefix], len(s.open_transactions))
            first = s.oldest_open
            oldest.add_metric([s.prefix], 0 if first is None else first.age_ms / 1000)
            if first is not None:
                timeout.add_metric([s.prefix], first.timeout_ms / 1000)
                headroom.add_metric([s.prefix], first.headroom_ms / 1000)
            for p in s.sink_partitions:
                key = [s.prefix, p.topic, str(p.partition)]
                stable.add_metric(key, p.last_stable)
                written.add_metric(key, p.high_watermark)
                pinned.add_metric(key, p.lso_lag)
            for p in s.source_partitions:
                key = [s.prefix, p.topic, str(p.partition)]
                source_stable.add_metric(key, p.last_stable)
                source_written.add_metric(key, p.high_watermark)
                source_pinned.add_metric(key, p.lso_lag)
        return [prefixes, state, age, proof, unfinished, opened, oldest, timeout, headroom, stable, written, pinned,
                source_stable, source_written, source_pinned, *self._group_families()]

    def _group_families(self) -> list[Any]:
        offset = _gauge("group_offset", "a consumer group's committed offset", ["group", "topic", "partition"])
        lag = _gauge("group_lag", "last stable offset minus the group's offset", ["group", "topic", "partition"])
        total = _gauge("group_sum_lag", "the group's lag summed over its partitions", ["group"])
        named = (record.consumer_group for record in self._catalog.records.values() if record.consumer_group)
        for group in dict.fromkeys((*self._groups, *sorted(named))):
            committed = _group_offsets(self._options, group)
            stable = last_stable(self._options, sorted(committed))
            group_total = 0
            for (topic, partition), position in sorted(committed.items()):
                if (topic, partition) not in stable:
                    continue
                behind = max(stable[(topic, partition)] - position, 0)
                group_total += behind
                offset.add_metric([group, topic, str(partition)], position)
                lag.add_metric([group, topic, str(partition)], behind)
            total.add_metric([group], group_total)
        return [offset, lag, total]


def installed_version() -> str:
    """The installed spark-kafka-eos's version ("unknown" where it is not installed: run from a source tree)."""
    try:
        return importlib.metadata.version("spark-kafka-eos")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _gauge(name: str, doc: str, labels: Sequence[str]) -> Any:
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily(f"kafka_eos_{name}", doc, labels=list(labels))


def _group_offsets(options: WriterOptions, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, of every partition it has one for."""
    futures = admin_client(options.connection).list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=_GROUP_TIMEOUT_S)
    listed = futures[group].result(_GROUP_TIMEOUT_S + 5)
    return {(tp.topic, tp.partition): tp.offset for tp in listed.topic_partitions or [] if tp.offset >= 0 and tp.error is None}
