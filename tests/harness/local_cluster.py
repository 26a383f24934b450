"""A three-node Apache Kafka cluster (KRaft) on loopback, for tests that crash brokers.

Every node is a :class:`~tests.harness.local_kafka.LocalKafka` (combined broker and controller)
with its own data directory, the same cluster id and a static quorum of all nodes as controller
voters. Data topics get replication factor 3 and ``min.insync.replicas=2`` by default, and so do
the offsets and transaction state topics.

Command line (used by the Makefile)::

    python -m tests.harness.local_cluster start --port 9093 --data-dir .cache/kafka/cluster
    python -m tests.harness.local_cluster stop --data-dir .cache/kafka/cluster
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from tests.harness.kafka import KafkaTestCluster
from tests.harness.local_kafka import (
    DEFAULT_LIBS_DIR,
    REPO_ROOT,
    LocalKafka,
    LocalKafkaError,
    StartStop,
    _random_cluster_id,
    free_loopback_port,
    running_pid,
    stop_by_pid_file,
)

T = TypeVar("T")


def _cluster_overrides(node_id: int, voters: str, size: int, min_insync: int) -> dict[str, str]:
    """The properties of node ``node_id`` that differ from the single-node template."""
    replicas = str(size)
    return {
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "default.replication.factor": replicas,
        "min.insync.replicas": str(min_insync),
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": str(min(2, size)),
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": str(min(2, size)),
    }


def _until(what: str, timeout_s: float, probe: Callable[[], T | None], hint: str = "") -> T:
    """Poll ``probe`` until it returns something other than None; a TimeoutError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            found = probe()
            if found is not None:
                return found
        except Exception as err:  # noqa: BLE001 - a node may be down or electing; retried until the deadline
            last_error = err
        time.sleep(0.3)
    raise TimeoutError(f"{what} did not happen within {timeout_s}s (last error: {last_error}){hint}")


class LocalCluster(StartStop):
    """``size`` combined broker+controller nodes (ids 1..size) on 127.0.0.1, owned by this process.

    Ports and the cluster id are kept in ``data_dir/cluster.json``: the cluster restarts on its data.
    ``node_overrides(node_id)`` adds broker properties of a node's own.
    """

    def __init__(self, data_dir: Path, size: int = 3, min_insync_replicas: int = 2, heap: str = "512m",
                 base_port: int | None = None, libs_dir: Path = DEFAULT_LIBS_DIR,
                 node_overrides: Callable[[int], dict[str, str]] | None = None) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.size = size
        self.data_dir.mkdir(parents=True, exist_ok=True)
        layout = self._layout(base_port)
        voters = ",".join(f"{n}@127.0.0.1:{layout['controller_ports'][n - 1]}" for n in self.node_ids)
        self.nodes: dict[int, LocalKafka] = {
            n: LocalKafka(
                self.data_dir / f"node-{n}", port=layout["ports"][n - 1], libs_dir=libs_dir, heap=heap,
                controller_port=layout["controller_ports"][n - 1], cluster_id=layout["cluster_id"],
                overrides={**_cluster_overrides(n, voters, size, min_insync_replicas),
                           **(node_overrides(n) if node_overrides else {})},
            )
            for n in self.node_ids
        }
        self._kafka: KafkaTestCluster | None = None

    @property
    def kafka(self) -> KafkaTestCluster:
        """Test helpers (topics of replication factor ``size``, producers, an independent read_committed
        consumer) on this cluster; made on first use, once nodes answer (its client logs every refused connection)."""
        if self._kafka is None:
            self._kafka = KafkaTestCluster(self.bootstrap_servers, replication_factor=self.size)
        return self._kafka

    def _layout(self, base_port: int | None) -> dict[str, Any]:
        """Ports and cluster id: read from ``cluster.json``, else chosen (free ports) and written there."""
        path = self.data_dir / "cluster.json"
        if path.exists():
            layout = json.loads(path.read_text())
            if len(layout["ports"]) == self.size:
                return layout
        layout = {
            "cluster_id": _random_cluster_id(),
            "ports": [base_port + i if base_port else free_loopback_port() for i in range(self.size)],
            "controller_ports": [free_loopback_port() for _ in range(self.size)],
        }
        path.write_text(json.dumps(layout))
        return layout

    @property
    def node_ids(self) -> list[int]:
        return list(range(1, self.size + 1))

    @property
    def bootstrap_servers(self) -> str:
        """Every node's listener, comma separated."""
        return ",".join(node.bootstrap_servers for node in self.nodes.values())

    def _logs(self, node_ids: list[int] | None = None) -> str:
        return "; logs: " + ", ".join(str(self.nodes[n].log_file) for n in node_ids or self.node_ids)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self, timeout_s: float = 120.0) -> LocalCluster:
        """Start every node at once (a quorum needs a majority) and wait until all are registered
        brokers; stops what it started and raises, naming the logs, if that takes over ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        try:
            for node in self.nodes.values():
                node.launch()
            for node in self.nodes.values():
                node.wait_until_serving(max(1.0, deadline - time.monotonic()))
            _until(f"all {self.size} brokers registering", max(1.0, deadline - time.monotonic()),
                   lambda: True if sorted(self.broker_ids()) == self.node_ids else None, self._logs())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop every node at once (SIGTERM, then SIGKILL), leaving no process behind: one by one, the
        last nodes would wait for a quorum that is gone."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            for stopped in [pool.submit(node.stop, timeout_s) for node in self.nodes.values()]:
                stopped.result()

    def kill(self, node_id: int) -> int:
        """SIGKILL node ``node_id`` (a crash) and return its exit code once it is gone."""
        return self.nodes[node_id].kill()

    def running(self, node_id: int) -> bool:
        return self.nodes[node_id].running

    def restart(self, node_id: int, timeout_s: float = 120.0) -> float:
        """Start node ``node_id`` again on its data directory and wait until it is a registered broker
        and back in the ISR of every partition it replicates; the seconds that took."""
        began = time.monotonic()
        node = self.nodes[node_id]
        node.launch()
        node.wait_until_serving(timeout_s)
        _until(f"node {node_id} rejoining the ISR of its partitions", max(1.0, timeout_s - (time.monotonic() - began)),
               lambda: True if not self.partitions_out_of_sync(node_id) else None, self._logs([node_id]))
        return time.monotonic() - began

    # -- metadata -------------------------------------------------------------------------
    def broker_ids(self) -> list[int]:
        """The brokers the cluster metadata lists (registered and not fenced)."""
        return sorted(self.kafka.admin.list_topics(timeout=10).brokers)

    def partitions_out_of_sync(self, node_id: int) -> list[tuple[str, int]]:
        """Partitions that have ``node_id`` as a replica but not in their ISR (or it is not registered)."""
        metadata = self.kafka.admin.list_topics(timeout=10)
        if node_id not in metadata.brokers:
            return [("<not registered>", -1)]
        return [
            (topic.topic, partition.id)
            for topic in metadata.topics.values()
            for partition in topic.partitions.values()
            if node_id in partition.replicas and node_id not in partition.isrs
        ]

    def leader_of(self, topic: str, partition: int = 0) -> int:
        """The node id leading ``topic``'s ``partition`` per the cluster metadata (-1: none)."""
        return int(self.kafka.admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader)

    def wait_for_leader(self, topic: str, partition: int = 0, other_than: int = -1, timeout_s: float = 60.0) -> int:
        """Wait until the partition has a leader other than ``other_than``; its node id."""
        def leader() -> int | None:
            current = self.leader_of(topic, partition)
            return current if current not in (-1, other_than) else None

        return _until(f"{topic}-{partition} electing a leader other than {other_than}", timeout_s, leader)

    def group_coordinator(self, group: str, timeout_s: float = 60.0) -> int:
        """The node id of ``group``'s coordinator (FindCoordinator)."""
        return self._find_coordinator(group, "GROUP", timeout_s)

    def transaction_coordinator(self, transactional_id: str, timeout_s: float = 60.0) -> int:
        """The node id of ``transactional_id``'s transaction coordinator (FindCoordinator)."""
        return self._find_coordinator(transactional_id, "TRANSACTION", timeout_s)

    def _find_coordinator(self, key: str, key_type: str, timeout_s: float) -> int:
        """FindCoordinator through kafka-python (not the package under test), a fresh client per call (no
        cached answer); retried while the coordinator is not available (its topic loading or electing)."""
        from kafka.admin import KafkaAdminClient
        from kafka.protocol.metadata import CoordinatorType

        def find() -> int:
            admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=10_000)
            try:
                # kafka-python has no public FindCoordinator; its admin methods use this one.
                return int(admin._manager.run(admin._find_coordinator_id, key, CoordinatorType[key_type]))
            finally:
                admin.close()

        return _until(f"finding the {key_type.lower()} coordinator of {key}", timeout_s, find)


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.local_cluster", description=__doc__)
    parser.add_argument("command", choices=["start", "stop"])
    parser.add_argument("--port", type=int, default=9093, help="the first node's port; the others follow")
    parser.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".cache" / "kafka" / "cluster")
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            alive = [n for n in (1, 2, 3) if running_pid(args.data_dir / f"node-{n}") is not None]
            if alive:
                print(f"Kafka cluster already running (nodes {alive}) with data in {args.data_dir}")
                return 0
            began = time.monotonic()
            cluster = LocalCluster(args.data_dir, base_port=args.port).start()
            print(f"Kafka cluster {cluster.bootstrap_servers} running (started in {time.monotonic() - began:.1f}s), "
                  f"logs {args.data_dir}/node-*/server.log")
        else:
            with ThreadPoolExecutor(3) as pool:  # all at once, as LocalCluster.stop does
                found = list(pool.map(lambda n: stop_by_pid_file(args.data_dir / f"node-{n}"), (1, 2, 3)))
            stopped = [n for n, was_running in zip((1, 2, 3), found) if was_running]
            print(f"Kafka cluster stopped (nodes {stopped})" if stopped else "Kafka cluster is not running (no pid files)")
    except (LocalKafkaError, TimeoutError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
