"""A single-node broker with a SASL_PLAINTEXT GSSAPI listener, whose realm is a :class:`tests.harness.kdc.Kdc`'s.

The listener is advertised as ``localhost``: a Kerberos client asks for the service ``kafka`` on the host it
connects to, so the broker's principal is ``kafka/localhost``. Its keytab and the realm's krb5.conf reach the
broker's JVM as the listener's JAAS configuration and ``-Djava.security.krb5.conf``. The PLAINTEXT listener stays
for the test's setup and its independent consumer.
"""

from __future__ import annotations

from pathlib import Path

from tests.harness.kdc import Kdc
from tests.harness.local_kafka import LocalKafka, free_loopback_port, listener_properties

SERVICE = "kafka"
HOST = "localhost"


def kerberos_properties(kdc: Kdc, port: int, keytab: Path) -> dict[str, str]:
    """Broker properties of a GSSAPI listener ``KERBEROS`` on ``port``, logging in as ``kafka/localhost`` with ``keytab``."""
    listeners = listener_properties("KERBEROS", "SASL_PLAINTEXT", port)
    return {
        **listeners,
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{{port}},KERBEROS://{HOST}:{port}",
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": SERVICE,
        "listener.name.kerberos.gssapi.sasl.jaas.config": (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
            f'keyTab="{keytab}" principal="{SERVICE}/{HOST}@{kdc.realm}";'
        ),
    }


class KerberosKafka(LocalKafka):
    """A :class:`LocalKafka` with a GSSAPI listener in ``kdc``'s realm (the principal ``kafka/localhost`` is made here)."""

    def __init__(self, data_dir: Path, kdc: Kdc) -> None:
        self.kdc = kdc
        self.kerberos_port = free_loopback_port()
        kdc.add_principal(f"{SERVICE}/{HOST}")
        Path(data_dir).mkdir(parents=True, exist_ok=True)
        keytab = kdc.keytab(f"{SERVICE}/{HOST}", Path(data_dir) / "kafka.keytab")
        super().__init__(Path(data_dir) / "data", overrides=kerberos_properties(kdc, self.kerberos_port, keytab))

    @property
    def kerberos_servers(self) -> str:
        """The GSSAPI listener's address, by the host name its principal is for."""
        return f"{HOST}:{self.kerberos_port}"

    def _java_command(self, main_class: str, *args: str) -> list[str]:
        java, *rest = super()._java_command(main_class, *args)
        return [java, f"-Djava.security.krb5.conf={self.kdc.krb5_conf}", *rest]

    def kerberos_options(self, principal: str, keytab: Path) -> dict[str, str]:
        """kafka.* options that log in as ``principal`` with ``keytab``: librdkafka's names, and nothing else."""
        return {
            "kafka.bootstrap.servers": self.kerberos_servers,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "GSSAPI",
            "kafka.sasl.kerberos.service.name": SERVICE,
            "kafka.sasl.kerberos.keytab": str(keytab),
            "kafka.sasl.kerberos.principal": principal,
        }
