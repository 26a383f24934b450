"""Single-node brokers with a TLS listener: SCRAM-SHA-512 over TLS with ACLs enforced (:class:`ScramTlsKafka`),
and TLS with client certificates required (:class:`MutualTlsKafka`).

A CA and the key pairs are made at test time with the JDK's ``keytool``; clients trust the CA through
``ssl.ca.location`` (a PEM file) and verify the broker's name (its certificate names 127.0.0.1). SCRAM users
are created after start through the PLAINTEXT listener, which is the super user (setup only).
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.harness.local_kafka import LocalKafka, conf_with_listener, free_loopback_port, java_executable

MECHANISM = "SCRAM-SHA-512"

_SECURED = """sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.location={keystore}
listener.name.sasl_ssl.ssl.keystore.password={store_password}
listener.name.sasl_ssl.ssl.keystore.type=PKCS12
listener.name.sasl_ssl.ssl.key.password={store_password}
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
allow.everyone.if.no.acl.found=false
"""


def _keytool(*steps: list[str]) -> None:
    keytool = str(Path(java_executable()).with_name("keytool"))
    for step in steps:
        done = subprocess.run([keytool, *step], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"keytool {step[0]} failed: {done.stdout}{done.stderr}")


def _signed_key_pair(directory: Path, store_password: str, alias: str, dname: str, extensions: list[str]) -> Path:
    """A PKCS#12 keystore ``{alias}.p12`` holding a key pair signed by the CA of ``directory`` (ca.p12), with the chain."""
    ca_store, ca_pem, keystore = directory / "ca.p12", directory / "ca.pem", directory / f"{alias}.p12"
    request, signed = directory / f"{alias}.csr", directory / f"{alias}.pem"
    store = ["-storetype", "PKCS12", "-storepass", store_password]
    _keytool(
        ["-genkeypair", "-alias", alias, "-keyalg", "RSA", "-keysize", "2048", "-dname", dname, *extensions,
         "-validity", "2", "-keystore", str(keystore), *store],
        ["-certreq", "-alias", alias, "-file", str(request), "-keystore", str(keystore), *store],
        ["-gencert", "-alias", "ca", "-infile", str(request), "-outfile", str(signed), "-rfc", *extensions,
         "-validity", "2", "-keystore", str(ca_store), *store],
        ["-importcert", "-alias", "ca", "-file", str(ca_pem), "-noprompt", "-keystore", str(keystore), *store],
        ["-importcert", "-alias", alias, "-file", str(signed), "-noprompt", "-keystore", str(keystore), *store],
    )
    return keystore


def make_certificates(directory: Path, store_password: str) -> tuple[Path, Path]:
    """A CA and a broker key pair signed by it, for 127.0.0.1: (the broker's PKCS#12 keystore, the CA's PEM)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_store, ca_pem = directory / "ca.p12", directory / "ca.pem"
    store = ["-storetype", "PKCS12", "-storepass", store_password]
    _keytool(
        ["-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=kafka-eos test CA",
         "-ext", "bc:c", "-validity", "2", "-keystore", str(ca_store), *store],
        ["-exportcert", "-alias", "ca", "-rfc", "-file", str(ca_pem), "-keystore", str(ca_store), *store],
    )
    keystore = _signed_key_pair(directory, store_password, "broker", "CN=127.0.0.1", ["-ext", "SAN=ip:127.0.0.1,dns:localhost"])
    return keystore, ca_pem


class ScramTlsKafka(LocalKafka):
    """A :class:`LocalKafka` with a SASL_SSL (SCRAM-SHA-512) listener on :attr:`sasl_ssl_port`."""

    def __init__(self, data_dir: Path) -> None:
        self.sasl_ssl_port = free_loopback_port()
        store_password = secrets.token_hex(12)
        keystore, self.ca_pem = make_certificates(Path(data_dir) / "tls", store_password)
        secured = _SECURED.replace("{keystore}", str(keystore)).replace("{store_password}", store_password)
        conf_dir = conf_with_listener(Path(data_dir), "SASL_SSL", "SASL_SSL", self.sasl_ssl_port, secured)
        super().__init__(Path(data_dir) / "data", conf_dir=conf_dir)
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        """The super user's admin client (PLAINTEXT listener): setup only."""
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        return self._admin

    def add_user(self, user: str, password: str) -> None:
        credential = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode())
        for future in self.admin.alter_user_scram_credentials([credential]).values():
            future.result(30)

    def grant(self, user: str, resource: ResourceType, prefix: str = "*", operation: AclOperation = AclOperation.ALL,
              permission: AclPermissionType = AclPermissionType.ALLOW) -> None:
        """``operation`` on the resources whose name starts with ``prefix`` (``*``: all of them; the
        cluster resource is ``kafka-cluster``); ``AclPermissionType.DENY`` takes it away (a DENY wins over any ALLOW)."""
        pattern = ResourcePatternType.LITERAL if prefix in ("*", "kafka-cluster") else ResourcePatternType.PREFIXED
        binding = AclBinding(resource, prefix, pattern, f"User:{user}", "*", operation, permission)
        for future in self.admin.create_acls([binding]).values():
            future.result(30)

    def client_options(self, user: str, password: str) -> dict[str, str]:
        """kafka_eos options that connect as ``user`` over SASL_SSL, trusting the test CA."""
        return {
            "kafka.bootstrap.servers": f"127.0.0.1:{self.sasl_ssl_port}",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": MECHANISM,
            "kafka.sasl.username": user,
            "kafka.sasl.password": password,
            "kafka.ssl.ca.location": str(self.ca_pem),
        }


_MUTUAL = """listener.name.ssl.ssl.keystore.location={keystore}
listener.name.ssl.ssl.keystore.password={store_password}
listener.name.ssl.ssl.keystore.type=PKCS12
listener.name.ssl.ssl.key.password={store_password}
listener.name.ssl.ssl.truststore.location={ca_pem}
listener.name.ssl.ssl.truststore.type=PEM
listener.name.ssl.ssl.client.auth=required
"""


@dataclass(frozen=True)
class ClientKeyPair:
    """The client's key pair signed by the test CA, in the forms librdkafka takes: a PKCS#12 keystore (and its
    password), and PEM (the certificate chain, the key in clear and the key encrypted with ``key_password``)."""

    keystore: Path
    keystore_password: str
    chain_pem: str
    key_pem: str
    encrypted_key_pem: str
    key_password: str


class MutualTlsKafka(LocalKafka):
    """A :class:`LocalKafka` with an SSL listener on :attr:`ssl_port` that requires a client certificate signed by
    the test CA (``ssl.client.auth=required``); :attr:`client` holds one."""

    def __init__(self, data_dir: Path) -> None:
        self.ssl_port = free_loopback_port()
        store_password = secrets.token_hex(12)
        directory = Path(data_dir) / "tls"
        keystore, self.ca_pem = make_certificates(directory, store_password)
        self.client = _client_key_pair(directory, store_password)
        mutual = _MUTUAL.format(keystore=keystore, store_password=store_password, ca_pem=self.ca_pem)
        conf_dir = conf_with_listener(Path(data_dir), "SSL", "SSL", self.ssl_port, mutual)
        super().__init__(Path(data_dir) / "data", conf_dir=conf_dir)

    def ssl_options(self) -> dict[str, str]:
        """kafka_eos options that reach the SSL listener, before any key pair: add one of the client's forms."""
        return {"kafka.bootstrap.servers": f"127.0.0.1:{self.ssl_port}", "kafka.security.protocol": "SSL"}


def _client_key_pair(directory: Path, store_password: str) -> ClientKeyPair:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    keystore = _signed_key_pair(directory, store_password, "client", "CN=kafka-eos client", [])
    key, certificate, extra = pkcs12.load_key_and_certificates(keystore.read_bytes(), store_password.encode())
    assert key is not None and certificate is not None
    chain = "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in [certificate, *extra])
    key_password = secrets.token_hex(12)

    def key_pem(encryption: serialization.KeySerializationEncryption) -> str:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption).decode()

    return ClientKeyPair(keystore, store_password, chain, key_pem(serialization.NoEncryption()),
                         key_pem(serialization.BestAvailableEncryption(key_password.encode())), key_password)
