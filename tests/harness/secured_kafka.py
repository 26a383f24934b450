"""Brokers that enforce ACLs, for authorization tests: a second single-node broker, and a three-node cluster.

Their PLAINTEXT listener is the super user (setup: topics, ACLs); their SASL_PLAINTEXT listener takes
the user ``reader`` (password ``reader-secret``), who may only do what the test grants.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from tests.harness.local_cluster import LocalCluster
from tests.harness.local_kafka import LocalKafka, free_loopback_port, listener_properties

READER = "reader"
READER_PASSWORD = "reader-secret"

_SECURED = {
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{READER}="{READER_PASSWORD}";',
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # The PLAINTEXT and CONTROLLER listeners: the test's setup, and the other nodes of a cluster.
    "super.users": "User:ANONYMOUS",
    "allow.everyone.if.no.acl.found": "false",
}


def secured_properties(sasl_port: int) -> dict[str, str]:
    """The broker properties of a SASL_PLAINTEXT listener for :data:`READER` on ``sasl_port``, and the authorizer."""
    return {**listener_properties("SASL_PLAINTEXT", "SASL_PLAINTEXT", sasl_port), **_SECURED}


def reader_options(sasl_ports: list[int]) -> dict[str, str]:
    """Source options that connect as :data:`READER` to the SASL listeners on ``sasl_ports``."""
    return {
        "kafka.bootstrap.servers": ",".join(f"127.0.0.1:{port}" for port in sasl_ports),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.username": READER,
        "kafka.sasl.password": READER_PASSWORD,
    }


class SecuredKafka(LocalKafka):
    """A :class:`LocalKafka` with an authorizer and a SASL/PLAIN listener for :data:`READER`."""

    def __init__(self, data_dir: Path) -> None:
        self.sasl_port = free_loopback_port()
        super().__init__(Path(data_dir) / "data", overrides=secured_properties(self.sasl_port))

    def reader_options(self) -> dict[str, str]:
        """Source options that connect as :data:`READER`."""
        return reader_options([self.sasl_port])


class SecuredCluster(LocalCluster):
    """A :class:`LocalCluster` whose every node is secured as :class:`SecuredKafka` is (the nodes and the
    test's setup speak PLAINTEXT, as the super user); ``cluster`` are LocalCluster's other arguments."""

    def __init__(self, data_dir: Path, **cluster: Any) -> None:
        self.sasl_ports: dict[int, int] = {}
        super().__init__(data_dir, node_overrides=self._secured, **cluster)

    def _secured(self, node_id: int) -> dict[str, str]:
        return secured_properties(self.sasl_ports.setdefault(node_id, free_loopback_port()))

    def reader_options(self) -> dict[str, str]:
        """Source options that connect as :data:`READER`, every node's SASL listener a bootstrap server."""
        return reader_options(list(self.sasl_ports.values()))


def allow(resource: ResourceType, name: str, *operations: AclOperation, pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> list[AclBinding]:
    """ACL bindings that allow :data:`READER` ``operations`` on one resource."""
    return [
        AclBinding(resource, name, pattern, f"User:{READER}", "*", operation, AclPermissionType.ALLOW)
        for operation in operations
    ]
