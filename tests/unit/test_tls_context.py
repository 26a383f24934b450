"""librdkafka's TLS settings -> the transaction session's ssl.SSLContext (no broker): each form of the client's
key pair loads, a handshake with a loopback server that requires a client certificate succeeds with it, and a
setting that cannot be read is named (never its value), leaving no key file behind."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from spark_kafka_eos._internal.config.kafka_python import translate
from spark_kafka_eos._internal.config.tls import TlsSettingError, tls_context

PASSWORD = "st0re-Pa55"


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Certificate | None,
                 issuer_key: ec.EllipticCurvePrivateKey, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer.subject if issuer else name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


class Material:
    """A CA, a server and a client key pair signed by it, written as librdkafka takes them."""

    def __init__(self, directory: Path) -> None:
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        self.ca = _certificate("test CA", self.ca_key, None, self.ca_key, ca=True)
        self.server_key = ec.generate_private_key(ec.SECP256R1())
        self.server = _certificate("127.0.0.1", self.server_key, self.ca, self.ca_key, ca=False)
        self.client_key = ec.generate_private_key(ec.SECP256R1())
        self.client = _certificate("client", self.client_key, self.ca, self.ca_key, ca=False)
        self.ca_pem = self.ca.public_bytes(serialization.Encoding.PEM).decode()
        self.chain_pem = self.client.public_bytes(serialization.Encoding.PEM).decode() + self.ca_pem
        self.key_pem = self._key(self.client_key, serialization.NoEncryption())
        self.encrypted_key_pem = self._key(self.client_key, serialization.BestAvailableEncryption(PASSWORD.encode()))
        self.keystore = directory / "client.p12"
        self.keystore.write_bytes(pkcs12.serialize_key_and_certificates(
            b"client", self.client_key, self.client, [self.ca], serialization.BestAvailableEncryption(PASSWORD.encode())))
        self.ca_file, self.certificate_file, self.key_file = directory / "ca.pem", directory / "client.pem", directory / "client.key"
        self.ca_file.write_text(self.ca_pem)
        self.certificate_file.write_text(self.chain_pem)
        self.key_file.write_text(self.encrypted_key_pem)
        self.server_files = directory / "server.pem", directory / "server.key"
        self.server_files[0].write_bytes(self.server.public_bytes(serialization.Encoding.PEM))
        self.server_files[1].write_text(self._key(self.server_key, serialization.NoEncryption()))

    @staticmethod
    def _key(key: ec.EllipticCurvePrivateKey, encryption: serialization.KeySerializationEncryption) -> str:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption).decode()

    def forms(self) -> dict[str, dict[str, str]]:
        return {
            "pkcs12": {"ssl.keystore.location": str(self.keystore), "ssl.keystore.password": PASSWORD, "ssl.ca.location": str(self.ca_file)},
            "inline-pem": {"ssl.certificate.pem": self.chain_pem, "ssl.key.pem": self.key_pem, "ssl.ca.pem": self.ca_pem},
            "inline-encrypted-pem": {"ssl.certificate.pem": self.chain_pem, "ssl.key.pem": self.encrypted_key_pem,
                                     "ssl.key.password": PASSWORD, "ssl.ca.pem": self.ca_pem},
            "pem-files": {"ssl.certificate.location": str(self.certificate_file), "ssl.key.location": str(self.key_file),
                          "ssl.key.password": PASSWORD, "ssl.ca.location": str(self.ca_file)},
        }


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> Material:
    return Material(tmp_path_factory.mktemp("tls"))


def handshake(material: Material, client: ssl.SSLContext) -> str:
    """The common name of the client certificate a loopback TLS server that requires one saw."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(material.server_files[0]), str(material.server_files[1]))
    server.load_verify_locations(cadata=material.ca_pem)
    server.verify_mode = ssl.CERT_REQUIRED
    seen: list[str] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(10)

        def serve() -> None:
            connection, _ = listener.accept()
            try:
                with server.wrap_socket(connection, server_side=True) as tls:
                    peer = tls.getpeercert() or {}
                    seen.extend(value for rdn in peer.get("subject", ()) for key, value in rdn if key == "commonName")
                    tls.sendall(b"ok")
            except (ssl.SSLError, OSError):
                pass

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        with socket.create_connection(listener.getsockname(), timeout=10) as raw, \
                client.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.recv(2)
        thread.join(10)
    return seen[0] if seen else ""


@pytest.mark.parametrize("form", ["pkcs12", "inline-pem", "inline-encrypted-pem", "pem-files"])
def test_each_form_of_the_key_pair_authenticates_the_client(material: Material, form: str) -> None:
    assert handshake(material, tls_context(material.forms()[form])) == "client"


def test_the_session_config_carries_the_context(material: Material) -> None:
    translated = translate({"kafka.security.protocol": "SSL", **{f"kafka.{k}": v for k, v in material.forms()["pkcs12"].items()}})
    context = translated["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert handshake(material, context) == "client"
    assert PASSWORD not in repr(translated)


def test_no_decoded_key_is_left_on_disk(material: Material) -> None:
    before = set(Path("/dev/shm").glob("kafka-eos-tls-*")) | set(Path("/tmp").glob("kafka-eos-tls-*"))
    tls_context(material.forms()["inline-pem"])
    tls_context(material.forms()["pkcs12"])
    assert set(Path("/dev/shm").glob("kafka-eos-tls-*")) | set(Path("/tmp").glob("kafka-eos-tls-*")) == before


def test_the_checks_follow_librdkafkas_settings(material: Material) -> None:
    default = tls_context({"ssl.ca.pem": material.ca_pem})
    assert default.check_hostname and default.verify_mode == ssl.CERT_REQUIRED
    assert len(default.get_ca_certs()) == 1
    assert not tls_context({"ssl.ca.pem": material.ca_pem, "ssl.endpoint.identification.algorithm": "none"}).check_hostname
    unverified = tls_context({"enable.ssl.certificate.verification": "false"})
    assert unverified.verify_mode == ssl.CERT_NONE and not unverified.check_hostname
    assert tls_context({"ssl.ca.location": "probe"}).verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ssl.SSLError):
        handshake(material, tls_context({"ssl.ca.location": "probe", **{k: v for k, v in material.forms()["pkcs12"].items()
                                                                         if k != "ssl.ca.location"}}))


@pytest.mark.parametrize(
    "change, named",
    [
        ({"ssl.keystore.password": "wr0ng-Pa55"}, "ssl.keystore.password"),
        ({"ssl.keystore.location": "/nonexistent/client.p12"}, "ssl.keystore.location"),
        ({"ssl.key.pem": "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----"}, "ssl.key.pem"),
        ({"ssl.certificate.pem": "garbage"}, "ssl.certificate.pem"),
        ({"ssl.certificate.location": "/nonexistent/client.pem"}, "ssl.certificate.location"),
        ({"ssl.ca.location": "/nonexistent/ca.pem"}, "ssl.ca.location"),
        ({"ssl.cipher.suites": "NO-SUCH-CIPHER"}, "ssl.cipher.suites"),
        ({"ssl.endpoint.identification.algorithm": "dns"}, "ssl.endpoint.identification.algorithm"),
    ],
)
def test_a_setting_that_cannot_be_read_is_named_without_its_value(material: Material, change: dict[str, str], named: str) -> None:
    base = material.forms()["inline-pem" if any(k.endswith(".pem") and k != "ssl.ca.pem" for k in change) else
                            "pem-files" if "ssl.certificate.location" in change else "pkcs12"]
    with pytest.raises(TlsSettingError) as raised:
        tls_context({**base, **change})
    assert raised.value.setting == named
    for value in (PASSWORD, material.key_pem, *change.values()):
        if value not in ("dns",):
            assert value not in str(raised.value)


def test_a_key_pair_given_twice_or_half_is_named(material: Material) -> None:
    forms = material.forms()
    with pytest.raises(TlsSettingError, match="given twice") as raised:
        tls_context({**forms["pkcs12"], **forms["inline-pem"]})
    assert raised.value.setting in ("ssl.certificate.pem", "ssl.keystore.location")
    with pytest.raises(TlsSettingError) as half:
        tls_context({"ssl.key.pem": material.key_pem})
    assert half.value.setting == "ssl.certificate.pem"
    with pytest.raises(TlsSettingError) as other:
        tls_context({"ssl.certificate.pem": material.ca_pem, "ssl.key.pem": material.key_pem})
    assert other.value.setting == "ssl.certificate.pem" and "does not match" in str(other.value)
