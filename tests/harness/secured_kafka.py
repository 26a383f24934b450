"""A second single-node broker that enforces ACLs, for authorization tests.

Its PLAINTEXT listener is the super user (setup: topics, ACLs); its SASL_PLAINTEXT listener takes
the user ``reader`` (password ``reader-secret``), who may only do what the test grants.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from tests.harness.local_kafka import LocalKafka, conf_with_listener, free_loopback_port

READER = "reader"
READER_PASSWORD = "reader-secret"

_SECURED = """sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_{user}="{password}";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
allow.everyone.if.no.acl.found=false
"""


class SecuredKafka(LocalKafka):
    """A :class:`LocalKafka` with an authorizer and a SASL/PLAIN listener for :data:`READER`."""

    def __init__(self, data_dir: Path) -> None:
        self.sasl_port = free_loopback_port()
        secured = _SECURED.replace("{user}", READER).replace("{password}", READER_PASSWORD)
        conf_dir = conf_with_listener(Path(data_dir), "SASL_PLAINTEXT", "SASL_PLAINTEXT", self.sasl_port, secured)
        super().__init__(Path(data_dir) / "data", conf_dir=conf_dir)

    def reader_options(self) -> dict[str, str]:
        """Source options that connect as :data:`READER`."""
        return {
            "kafka.bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.username": READER,
            "kafka.sasl.password": READER_PASSWORD,
        }


def allow(resource: ResourceType, name: str, *operations: AclOperation, pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> list[AclBinding]:
    """ACL bindings that allow :data:`READER` ``operations`` on one resource."""
    return [
        AclBinding(resource, name, pattern, f"User:{READER}", "*", operation, AclPermissionType.ALLOW)
        for operation in operations
    ]
