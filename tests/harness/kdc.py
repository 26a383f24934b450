"""An MIT Kerberos KDC on loopback, for the GSSAPI tests: a realm of its own (database, kdc.conf, krb5.conf,
keytabs) in a directory of the test's, on a free port. Its tools run with KRB5_CONFIG and KRB5_KDC_PROFILE in
their own environment only; the KDC is a child of this process, stopped by :meth:`Kdc.stop`, and ends by itself
after ``lifetime_s`` should the test run die first.

The binaries come from Debian's krb5-kdc and krb5-admin-server (``make test`` installs them where it may run
apt-get; see :func:`missing_tools`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.harness.local_kafka import StartStop, free_loopback_port

REALM = "EOS.TEST"
TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "timeout")
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")


class KdcError(RuntimeError):
    """The KDC could not be prepared, started or asked."""


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(_SBIN))


def missing_tools() -> list[str]:
    """The KDC's programs that are not installed (``apt-get install krb5-kdc krb5-admin-server`` brings them)."""
    return [name for name in TOOLS if _tool(name) is None]


_KDC_CONF = """[kdcdefaults]
 kdc_ports = {port}
 kdc_tcp_ports = {port}

[realms]
 {realm} = {{
  database_name = {dir}/principal
  key_stash_file = {dir}/stash
  acl_file = {dir}/kadm5.acl
  kdc_ports = {port}
  kdc_tcp_ports = {port}
  max_life = 1h
  max_renewable_life = 1h
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
 }}

[logging]
 kdc = FILE:{dir}/kdc.log
"""

# Clients (python-gssapi, librdkafka's kinit, the broker's JVM) take the realm from here. TCP only (Java's client
# would try UDP first); no DNS; and a default ticket cache inside the directory, which a test can check stays unused.
_KRB5_CONF = """[libdefaults]
 default_realm = {realm}
 dns_lookup_realm = false
 dns_lookup_kdc = false
 dns_canonicalize_hostname = false
 rdns = false
 udp_preference_limit = 1
 ticket_lifetime = 1h
 default_ccache_name = FILE:{dir}/default-ccache

[realms]
 {realm} = {{
  kdc = 127.0.0.1:{port}
 }}

[domain_realm]
 localhost = {realm}
"""


class Kdc(StartStop):
    """An MIT KDC for :data:`REALM` in ``directory`` (created). Use as a context manager, or :meth:`start` and :meth:`stop`."""

    def __init__(self, directory: Path, realm: str = REALM, lifetime_s: int = 900) -> None:
        self.directory = Path(directory).resolve()
        self.realm = realm
        self.lifetime_s = lifetime_s
        self.port = free_loopback_port()
        self.krb5_conf = self.directory / "krb5.conf"
        self.kdc_conf = self.directory / "kdc.conf"
        self.log_file = self.directory / "kdc.log"
        self.default_ccache = self.directory / "default-ccache"
        self._process: subprocess.Popen[bytes] | None = None

    def _environment(self) -> dict[str, str]:
        return {**os.environ, "KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def _run(self, *command: str, timeout_s: float = 30.0) -> str:
        program = _tool(command[0])
        if program is None:
            raise KdcError(f"{command[0]} is not installed: apt-get install krb5-kdc krb5-admin-server")
        done = subprocess.run([program, *command[1:]], env=self._environment(), capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise KdcError(f"{command[0]} {command[1] if len(command) > 1 else ''} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def start(self, timeout_s: float = 20.0) -> Kdc:
        """Write the configuration, create the realm's database and start the KDC; wait until it takes connections."""
        if missing_tools():
            raise KdcError(f"not installed: {', '.join(missing_tools())} (apt-get install krb5-kdc krb5-admin-server)")
        self.directory.mkdir(parents=True, exist_ok=True)
        fill = {"realm": self.realm, "port": self.port, "dir": self.directory}
        self.kdc_conf.write_text(_KDC_CONF.format(**fill))
        self.krb5_conf.write_text(_KRB5_CONF.format(**fill))
        (self.directory / "kadm5.acl").write_text("")
        # The master key protects the database of a realm that lives as long as this test: made here, kept nowhere.
        self._run("kdb5_util", "create", "-s", "-r", self.realm, "-P", secrets.token_hex(16))
        log = open(self.directory / "krb5kdc.out", "ab")
        timeout, kdc = _tool("timeout"), _tool("krb5kdc")
        assert timeout and kdc
        self._process = subprocess.Popen(
            [timeout, "-s", "KILL", str(self.lifetime_s), kdc, "-n", "-r", self.realm],
            env=self._environment(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise KdcError(f"krb5kdc exited with code {self._process.returncode}; see {self.directory / 'krb5kdc.out'}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise KdcError(f"the KDC did not listen on 127.0.0.1:{self.port} within {timeout_s}s; see {self.log_file}")

    def add_principal(self, name: str, max_life: str | None = None) -> str:
        """Create ``name`` (without realm) with a random key, its tickets lasting at most ``max_life`` (kadmin's
        words, e.g. "10 seconds"; else the realm's hour); returns its full name."""
        life = f' -maxlife "{max_life}"' if max_life else ""
        self._run("kadmin.local", "-r", self.realm, "-q", f"addprinc -randkey{life} {name}")
        return f"{name}@{self.realm}"

    def keytab(self, name: str, path: Path) -> Path:
        """Write ``name``'s keys to the keytab ``path``. Each call gives the principal new keys, so a keytab
        written before no longer logs in (a stale keytab)."""
        self._run("kadmin.local", "-r", self.realm, "-q", f"ktadd -k {path} {name}")
        return path

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the KDC (SIGTERM, then SIGKILL). Idempotent."""
        if self._process is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self._process.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self._process.wait(timeout_s)
                break
            except subprocess.TimeoutExpired:
                continue
        self._process = None
