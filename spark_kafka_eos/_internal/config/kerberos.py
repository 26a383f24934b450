"""Kerberos (GSSAPI) from a keytab for the transaction session (kafka-python), with no ``kinit``.

librdkafka logs in from ``sasl.kerberos.keytab`` itself (it runs kinit). kafka-python's GSSAPI mechanism uses the
process's default credentials, the ticket cache that a kinit fills. Here the principal logs in with the keytab's keys
to a credential cache in this process's memory (``gss_acquire_cred_from`` with a ``client_keytab`` and a ``MEMORY:``
ccache). The credentials are acquired again for each connection: the Kerberos library then takes the cached ticket,
or a new one from the keytab once the cached one is near its end (an acquired handle itself is never renewed). Only
the connections of a configuration carrying the login use it: no environment variable, default ticket cache or file
is changed.

kafka-python gives a connection's SASL mechanism only its own settings, and finds the mechanism by the name it sends
to the broker ('GSSAPI'). The one setting that can carry a login is ``sasl_kerberos_name``; so kafka-python's 'GSSAPI'
entry is wrapped, once: a connection whose ``sasl_kerberos_name`` is a :class:`KeytabLogin` authenticates with its
credentials, and every other connection gets the mechanism registered before, unchanged.
"""

from __future__ import annotations

import importlib
import os
import threading
import uuid
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kafka.net import sasl
from kafka.net.sasl.gssapi import SaslMechanismGSSAPI

from spark_kafka_eos._internal.config.setting_error import UnsupportedSettingError

DEFAULT_PRINCIPAL = "kafkaclient"
"""librdkafka's default ``sasl.kerberos.principal``: a keytab without a principal logs in as it, as librdkafka's kinit does."""

KEYTAB = "sasl.kerberos.keytab"
PRINCIPAL = "sasl.kerberos.principal"

_INSTALL = (
    "pip install 'spark-kafka-eos[kerberos]' on the driver (python-gssapi; it builds against MIT Kerberos' libkrb5: "
    "apt-get install libkrb5-dev, or dnf install krb5-devel)."
)

_lock = threading.Lock()
_ccaches: dict[KeytabLogin, str] = {}


class KerberosLoginError(UnsupportedSettingError):
    """The transaction session cannot log in; ``setting`` is the librdkafka setting to check, ``fix`` what to do."""


@dataclass(frozen=True)
class KeytabLogin:
    """Who the transaction session is: ``principal``, with the keys of ``keytab`` (None: the principal's ticket in
    the default ticket cache, from a kinit). Carried to the GSSAPI mechanism as kafka-python's ``sasl_kerberos_name``."""

    principal: str
    keytab: str | None = None

    def credentials(self) -> Any:
        """Initiator credentials (``gssapi.Credentials``) with a ticket that has not expired: from this login's
        memory ccache (one per process), which the Kerberos library refills from the keytab when needed."""
        return _acquire(self)

    def _ccache(self) -> str:
        with _lock:
            return _ccaches.setdefault(self, f"MEMORY:spark-kafka-eos-{uuid.uuid4().hex}")


def session_login(keytab: str | None, principal: str | None) -> KeytabLogin:
    """Log in as ``principal`` (default :data:`DEFAULT_PRINCIPAL` with a keytab) with ``keytab``, now, so that a bad
    keytab or principal fails before any data moves; and let kafka-python's GSSAPI connections carrying the returned
    login use its credentials. Raises :class:`KerberosLoginError` naming the setting."""
    _gssapi(KEYTAB if keytab is not None else PRINCIPAL)
    if keytab is not None and not keytab.strip():
        raise KerberosLoginError(KEYTAB, f"{KEYTAB} is empty", "give the path of the principal's keytab file.")
    keytab = keytab.strip() if keytab is not None else None
    principal = (principal or "").strip() or (DEFAULT_PRINCIPAL if keytab else "")
    if not principal:
        raise KerberosLoginError(PRINCIPAL, f"{PRINCIPAL} is empty", "give the principal to log in as.")
    if keytab is not None:
        _check_readable(keytab)
    login = KeytabLogin(principal, keytab)
    login.credentials()
    _install()
    return login


def _gssapi(setting: str) -> ModuleType:
    try:
        # Imported by name: python-gssapi is an optional extra, which need not be installed where mypy runs.
        return importlib.import_module("gssapi")
    except (ImportError, OSError) as err:
        raise KerberosLoginError(
            setting, f"{setting} needs python-gssapi for the transaction session (kafka-python's GSSAPI), and it cannot be "
            f"imported ({type(err).__name__}): install the extra spark-kafka-eos[kerberos]", _INSTALL,
        ) from None


def _check_readable(keytab: str) -> None:
    """A keytab given as a path (or ``FILE:path``) must be a readable file here, on the driver."""
    path = keytab.removeprefix("FILE:") if keytab.startswith("FILE:") or ":" not in keytab else None
    if path is not None and not (os.path.isfile(path) and os.access(path, os.R_OK)):
        raise KerberosLoginError(KEYTAB, f"{KEYTAB}: no readable keytab file at {path} on the driver",
                                 "give a keytab file readable on the driver (and on the executors, where librdkafka's kinit reads it).")


def _acquire(login: KeytabLogin) -> Any:
    """``gssapi.Credentials`` for ``login``: with a keytab, from the login's ccache in this process's memory."""
    setting = KEYTAB if login.keytab is not None else PRINCIPAL
    gssapi = _gssapi(setting)
    try:
        name = gssapi.Name(login.principal, gssapi.NameType.kerberos_principal)
        if login.keytab is None:
            credentials = gssapi.Credentials(name=name, usage="initiate")
        else:
            store = {"client_keytab": login.keytab, "ccache": login._ccache()}
            credentials = gssapi.Credentials(name=name, usage="initiate", store=store)
        credentials.lifetime  # noqa: B018 - a ticket now: a refused login fails here, not in a connection
    except gssapi.exceptions.GSSError as err:
        if login.keytab is not None:
            source = f"with the keytab {login.keytab} ({KEYTAB})"
            check = "that the keytab holds the principal's current keys (klist -kt lists them)"
        else:
            source = f"from the default ticket cache, a kinit's (no {KEYTAB} given)"
            check = f"that a kinit for the principal was run, or give {KEYTAB}"
        raise KerberosLoginError(
            setting, f"the transaction session cannot log in to Kerberos as {login.principal} ({PRINCIPAL}) {source}: "
            f"{_gss_message(err)}", f"check {check}, and that krb5.conf names the KDC of its realm.",
        ) from None
    return credentials


def _gss_message(err: Exception) -> str:
    """The Kerberos library's own words (its minor status), which name no key."""
    return " ".join(str(err).split())


class _KeytabGssapi(SaslMechanismGSSAPI):
    """kafka-python's GSSAPI exchange, initiated with a :class:`KeytabLogin`'s credentials instead of the default
    ones. Its ``__init__`` is kafka-python's (3.0), but for the credentials; the exchange itself is inherited."""

    def __init__(self, **config: Any) -> None:
        gssapi = _gssapi(KEYTAB)
        login: KeytabLogin = config["sasl_kerberos_name"]
        self._is_done = False
        self._is_authenticated = False
        host = config.get("sasl_kerberos_domain_name") or config.get("host", "")
        self.auth_id = f"{config['sasl_kerberos_service_name']}@{host}"
        self.gssapi_name = gssapi.Name(self.auth_id, name_type=gssapi.NameType.hostbased_service).canonicalize(gssapi.MechType.kerberos)
        self._client_ctx = gssapi.SecurityContext(name=self.gssapi_name, creds=login.credentials(), usage="initiate")
        self._next_token = self._client_ctx.step(None)


class _GssapiMechanisms:
    """kafka-python's 'GSSAPI' entry: :class:`_KeytabGssapi` for a connection carrying a :class:`KeytabLogin`,
    else ``fallback``, the mechanism registered before."""

    def __init__(self, fallback: Any) -> None:
        self.fallback = fallback

    def __call__(self, **config: Any) -> Any:
        if isinstance(config.get("sasl_kerberos_name"), KeytabLogin):
            return _KeytabGssapi(**config)
        return self.fallback(**config)


def _install() -> None:
    """Wrap kafka-python's 'GSSAPI' entry, unless it is wrapped already."""
    with _lock:
        current = sasl.get_sasl_mechanism("GSSAPI")
        if not isinstance(current, _GssapiMechanisms):
            sasl.register_sasl_mechanism("GSSAPI", _GssapiMechanisms(current), overwrite=True)
