"""librdkafka's TLS settings -> the ``ssl.SSLContext`` of the transaction session (kafka-python).

librdkafka takes the client certificate and key from PEM files, inline PEM or a PKCS#12 keystore, and the CA
certificates from a file, a directory, inline PEM or the system's stores. Python's ``ssl`` module reads CA
certificates from memory, but a key pair only from files and never from PKCS#12. So a key pair given inline or in
a keystore is decoded here (``cryptography``), written to a private temporary file with its key encrypted under a
one-time password, loaded, and removed at once: the context keeps it in memory, and no clear key touches the disk.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from spark_kafka_eos._internal.config.setting_error import UnsupportedSettingError

TLS_SETTINGS = frozenset({
    "ssl.ca.location", "ssl.ca.pem", "ssl.crl.location",
    "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "ssl.certificate.pem", "ssl.key.pem",
    "ssl.keystore.location", "ssl.keystore.password",
    "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification", "ssl.cipher.suites",
})
"""The librdkafka settings (without ``kafka.``) this module turns into the context."""

_KEY_PAIR_SOURCES = {
    "PEM files": ("ssl.certificate.location", "ssl.key.location"),
    "inline PEM": ("ssl.certificate.pem", "ssl.key.pem"),
    "a PKCS#12 keystore": ("ssl.keystore.location",),
}


class TlsSettingError(UnsupportedSettingError):
    """A TLS setting that cannot be used; ``setting`` is its librdkafka name (never its value)."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(setting, message, "check the file and its password, and that the certificate and the key belong "
                         "together; the driver needs them as the executors do (the sink's transaction session runs there).")


def tls_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """The client context librdkafka would build from ``settings`` (librdkafka names without ``kafka.``,
    lower case): CA certificates, the client's key pair if one is given, hostname and certificate checks,
    ciphers. Raises :class:`TlsSettingError` naming the setting that cannot be read."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_ca(context, settings)
    if "ssl.crl.location" in settings:
        _read("ssl.crl.location", lambda: context.load_verify_locations(cafile=settings["ssl.crl.location"]))
        context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    _load_key_pair(context, settings)
    algorithm = settings.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", "none"):
        raise TlsSettingError("ssl.endpoint.identification.algorithm",
                              f"ssl.endpoint.identification.algorithm={algorithm!r} is not valid; use 'https' or 'none'")
    context.check_hostname = algorithm == "https"
    verify = settings.get("enable.ssl.certificate.verification", "true").strip().lower()
    if verify not in ("true", "false"):
        raise TlsSettingError("enable.ssl.certificate.verification",
                              f"enable.ssl.certificate.verification={verify!r} is not valid; use 'true' or 'false'")
    if verify == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if "ssl.cipher.suites" in settings:
        _read("ssl.cipher.suites", lambda: context.set_ciphers(settings["ssl.cipher.suites"]))
    return context


def _read(setting: str, load: Callable[[], object]) -> None:
    """Run ``load``; a file that cannot be read or parsed becomes an error naming ``setting``."""
    try:
        load()
    except (OSError, ssl.SSLError, ValueError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else type(err).__name__
        raise TlsSettingError(setting, f"{setting} cannot be read for the transaction session ({reason})") from None


def _load_ca(context: ssl.SSLContext, settings: Mapping[str, str]) -> None:
    location, pem = settings.get("ssl.ca.location", "").strip(), settings.get("ssl.ca.pem", "").strip()
    if pem:
        _read("ssl.ca.pem", lambda: context.load_verify_locations(cadata=pem))
    if location.lower() == "probe" or not (location or pem):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    elif location:
        if Path(location).is_dir():
            _read("ssl.ca.location", lambda: context.load_verify_locations(capath=location))
        else:
            _read("ssl.ca.location", lambda: context.load_verify_locations(cafile=location))


def _load_key_pair(context: ssl.SSLContext, settings: Mapping[str, str]) -> None:
    given = [source for source, keys in _KEY_PAIR_SOURCES.items() if any(settings.get(k, "").strip() for k in keys)]
    if len(given) > 1:
        raise TlsSettingError(_KEY_PAIR_SOURCES[given[1]][0],
                              f"the client's key pair is given twice ({' and '.join(given)}); give one of them")
    if not given:
        return
    source = given[0]
    if source == "PEM files":
        certificate, key = settings.get("ssl.certificate.location", "").strip(), settings.get("ssl.key.location", "").strip()
        if not certificate:
            raise TlsSettingError("ssl.certificate.location", "ssl.key.location is set without ssl.certificate.location")
        password = settings.get("ssl.key.password") or None
        _read("ssl.certificate.location", lambda: context.load_cert_chain(certificate, key or None, password))
        return
    if source == "inline PEM":
        _load_in_memory(context, *_inline_pem(settings), setting="ssl.certificate.pem")
    else:
        _load_in_memory(context, *_keystore(settings), setting="ssl.keystore.location")


def _cryptography(setting: str) -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise TlsSettingError(setting, f"{setting} needs the cryptography package for the transaction session: "
                                       "pip install cryptography") from None
    return serialization


def _inline_pem(settings: Mapping[str, str]) -> tuple[Any, list[Any]]:
    from cryptography import x509

    serialization = _cryptography("ssl.key.pem")
    certificate, key = settings.get("ssl.certificate.pem", "").strip(), settings.get("ssl.key.pem", "").strip()
    if not certificate or not key:
        missing = "ssl.certificate.pem" if not certificate else "ssl.key.pem"
        raise TlsSettingError(missing, "ssl.certificate.pem and ssl.key.pem go together; one of them is missing")
    password = settings.get("ssl.key.password")
    try:
        key_object = serialization.load_pem_private_key(key.encode(), password.encode() if password else None)
    except (ValueError, TypeError):
        raise TlsSettingError("ssl.key.pem", "ssl.key.pem cannot be read as a PEM private key "
                                             "(with ssl.key.password if it is encrypted)") from None
    try:
        chain = x509.load_pem_x509_certificates(certificate.encode())
    except ValueError:
        raise TlsSettingError("ssl.certificate.pem", "ssl.certificate.pem cannot be read as PEM certificates") from None
    return key_object, chain


def _keystore(settings: Mapping[str, str]) -> tuple[Any, list[Any]]:
    _cryptography("ssl.keystore.location")
    from cryptography.hazmat.primitives.serialization import pkcs12

    location, password = settings["ssl.keystore.location"].strip(), settings.get("ssl.keystore.password")
    try:
        data = Path(location).read_bytes()
    except OSError as err:
        raise TlsSettingError("ssl.keystore.location",
                              f"ssl.keystore.location cannot be read for the transaction session ({err.strerror})") from None
    try:
        key_object, certificate, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except (ValueError, TypeError):
        raise TlsSettingError("ssl.keystore.password", "the PKCS#12 keystore in ssl.keystore.location cannot be opened "
                                                       "with ssl.keystore.password (wrong password, or not PKCS#12)") from None
    if key_object is None or certificate is None:
        raise TlsSettingError("ssl.keystore.location", "the PKCS#12 keystore in ssl.keystore.location holds no private "
                                                       "key with its certificate")
    return key_object, [certificate, *extra]


def _load_in_memory(context: ssl.SSLContext, key_object: Any, chain: list[Any], setting: str) -> None:
    """Load a decoded key pair into ``context`` through files that live only while it is read."""
    serialization = _cryptography(setting)
    one_time = secrets.token_urlsafe(24)
    key_pem = key_object.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.BestAvailableEncryption(one_time.encode()))
    chain_pem = b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in chain)
    shared_memory = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="kafka-eos-tls-", dir=shared_memory) as directory:
        key_file, chain_file = Path(directory) / "key.pem", Path(directory) / "chain.pem"
        for path, data in ((key_file, key_pem), (chain_file, chain_pem)):
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
                out.write(data)
        try:
            context.load_cert_chain(str(chain_file), str(key_file), one_time)
        except ssl.SSLError:
            raise TlsSettingError(setting, f"{setting}: the client's certificate does not match its private key") from None
