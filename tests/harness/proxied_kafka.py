"""A single-node broker whose clients go through a :class:`~tests.harness.fault_proxy.FaultProxy`, for the
network-fault tier (tests/integration/faults).

Kafka clients reconnect to the address the broker advertises, not to the one they bootstrapped from, so the
proxy must be what the broker advertises: its ``PLAINTEXT`` listener listens on a port of its own and
advertises the proxy's port (every client of the code under test goes through the proxy, on every
connection). A second listener, ``JUDGE``, listens and advertises on another port: the independent judges
(the read_committed consumer, Kafka's ``kafka-transactions``, the tests' set-up) use it directly, never
through the proxy, and so does the broker itself (``inter.broker.listener.name``: its transaction markers
reach its partitions without faults). The controller listener is the template's.
"""

from __future__ import annotations

from pathlib import Path

from tests.harness.fault_proxy import FaultProxy
from tests.harness.kafka import KafkaTestCluster
from tests.harness.local_kafka import LocalKafka, conf_with_listener, free_loopback_port

JUDGE_LISTENER = "JUDGE"


class ProxiedKafka(LocalKafka):
    """A :class:`LocalKafka` behind a fault proxy: :attr:`proxied_bootstrap` for the code under test,
    :attr:`judge_bootstrap` (and :meth:`judge`) for the tests' own clients."""

    def __init__(self, data_dir: Path) -> None:
        self.judge_port = free_loopback_port()
        self.proxy = FaultProxy(upstream_port=0)
        conf_dir = conf_with_listener(Path(data_dir), JUDGE_LISTENER, "PLAINTEXT", self.judge_port, "")
        super().__init__(Path(data_dir) / "data", conf_dir=conf_dir)
        self.proxy.upstream_port = self.port

    @property
    def proxied_bootstrap(self) -> str:
        return self.proxy.address

    @property
    def judge_bootstrap(self) -> str:
        return f"127.0.0.1:{self.judge_port}"

    def judge(self) -> KafkaTestCluster:
        return KafkaTestCluster(self.judge_bootstrap)

    def start(self, timeout_s: float = 90.0) -> ProxiedKafka:
        # The proxy first: the broker advertises its port, so the broker serves through it from the start.
        self.proxy.start()
        self.overrides.update({
            "advertised.listeners": f"PLAINTEXT://{self.proxied_bootstrap},{JUDGE_LISTENER}://{self.judge_bootstrap}",
            "inter.broker.listener.name": JUDGE_LISTENER,
        })
        try:
            super().start(timeout_s)
        except BaseException:
            self.proxy.stop()
            raise
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        try:
            super().stop(timeout_s)
        finally:
            self.proxy.stop()

    def kill(self, timeout_s: float = 10.0) -> int:
        try:
            return super().kill(timeout_s)
        finally:
            self.proxy.stop()
