"""A second single-node broker that enforces ACLs, for authorization tests.

Its PLAINTEXT listener is the super user (setup: topics, ACLs); its SASL_PLAINTEXT listener takes
the user ``reader`` (password ``reader-secret``), who may only do what the test grants.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from tests.harness.local_kafka import DEFAULT_CONF_DIR, LocalKafka, free_loopback_port

READER = "reader"
READER_PASSWORD = "reader-secret"

_SECURED = """
listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_{user}="{password}";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
allow.everyone.if.no.acl.found=false
"""


class SecuredKafka(LocalKafka):
    """A :class:`LocalKafka` with an authorizer and a SASL/PLAIN listener for :data:`READER`."""

    def __init__(self, data_dir: Path) -> None:
        conf_dir = Path(data_dir) / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(DEFAULT_CONF_DIR / "kafka-log4j2.properties", conf_dir)
        self.sasl_port = free_loopback_port()
        template = (DEFAULT_CONF_DIR / "kafka-broker.properties").read_text()
        kept = [line for line in template.splitlines() if not line.startswith(("listeners=", "advertised.listeners=", "listener.security.protocol.map="))]
        secured = _SECURED.replace("{sasl_port}", str(self.sasl_port)).replace("{user}", READER).replace("{password}", READER_PASSWORD)
        (conf_dir / "kafka-broker.properties").write_text("\n".join(kept) + secured)
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
