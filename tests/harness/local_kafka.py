"""An embedded single-node Apache Kafka broker (KRaft) for demos and tests (not part of the package:
it needs the repository's conf/ and the jars that make resolves into .cache/).

The broker jars are resolved from Maven Central by ``make kafka-jars`` (see
``conf/kafka-broker-pom.xml``); this module only formats a data directory, starts
``kafka.Kafka`` on loopback ports and stops it again.

Command line (used by the Makefile)::

    python -m tests.harness.local_kafka start --port 9092 --data-dir .cache/kafka/data
    python -m tests.harness.local_kafka stop --data-dir .cache/kafka/data
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TypeVar


def _project_root() -> Path:
    """The checkout holding conf/ and .cache/: $KAFKA_EOS_HOME, else the nearest folder up from the
    working directory with conf/kafka-broker.properties, else the one beside this package."""
    if os.environ.get("KAFKA_EOS_HOME"):
        return Path(os.environ["KAFKA_EOS_HOME"]).resolve()
    for folder in (Path.cwd(), *Path.cwd().parents):
        if (folder / "conf" / "kafka-broker.properties").exists():
            return folder
    return Path(__file__).resolve().parents[2]


REPO_ROOT = _project_root()
DEFAULT_LIBS_DIR = REPO_ROOT / ".cache" / "kafka" / "libs"
DEFAULT_CONF_DIR = REPO_ROOT / "conf"
MIN_JAVA_MAJOR = 17


class LocalKafkaError(RuntimeError):
    """The local broker could not be prepared, started or stopped."""


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def java_executable() -> str:
    """Path of a Java 17+ ``java``, from JAVA_HOME or PATH; a clear error otherwise."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not candidate or not Path(candidate).exists():
        raise LocalKafkaError(
            "Java 17 or newer is needed to run the local Kafka broker, and none was found "
            "(checked JAVA_HOME and PATH). Install a JDK 17+, e.g. `apt-get install openjdk-17-jdk-headless`."
        )
    out = subprocess.run([candidate, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):
        major = int(match.group(2))
    if major < MIN_JAVA_MAJOR:
        raise LocalKafkaError(
            f"Java {MIN_JAVA_MAJOR}+ is needed to run Kafka 4.x, but {candidate} is Java {major or 'unknown'}. "
            "Point JAVA_HOME at a JDK 17+."
        )
    return candidate


def _random_cluster_id() -> str:
    """A Kafka cluster id (url-safe base64 of a uuid) that does not start with "-".

    Like Kafka's own ``Uuid.randomUuid``: a leading "-" reads as an option on a command line.
    """
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not candidate.startswith("-"):
            return candidate


def listener_properties(name: str, protocol: str, port: int) -> dict[str, str]:
    """The broker properties of a listener ``name`` with security ``protocol`` on ``port`` beside the PLAINTEXT
    and CONTROLLER ones, whose ports stay the ``{port}`` and ``{controller_port}`` that :class:`LocalKafka` fills."""
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{{port}},{name}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{{controller_port}}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{{port}},{name}://127.0.0.1:{port}",
        "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,{name}:{protocol}",
    }


def conf_with_listener(data_dir: Path, name: str, protocol: str, port: int, settings: str) -> Path:
    """A conf directory under ``data_dir``: the project's broker settings plus a listener ``name`` with
    security ``protocol`` on ``port`` and its ``settings`` (properties). For brokers with a SASL or
    OAUTHBEARER listener beside the PLAINTEXT one."""
    listeners = listener_properties(name, protocol, port)
    conf_dir = Path(data_dir) / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(DEFAULT_CONF_DIR / "kafka-log4j2.properties", conf_dir)
    template = (DEFAULT_CONF_DIR / "kafka-broker.properties").read_text()
    kept = [line for line in template.splitlines() if line.split("=", 1)[0] not in listeners]
    added = [f"{key}={value}" for key, value in listeners.items()]
    (conf_dir / "kafka-broker.properties").write_text("\n".join(kept + added) + "\n" + settings)
    return conf_dir


_REQUEST_LOGGER = """
appender.requests.type = File
appender.requests.name = requests
appender.requests.fileName = {file}
appender.requests.layout.type = PatternLayout
appender.requests.layout.pattern = %m%n
logger.requests.name = kafka.request.logger
logger.requests.level = DEBUG
logger.requests.additivity = false
logger.requests.appenderRef.requests.ref = requests
"""
"""Kafka's request logger at DEBUG: one 'Completed request:{json}' line per request, with its client and timings."""

Started = TypeVar("Started", bound="StartStop")


class StartStop:
    """A context manager that calls ``start()`` on entry and ``stop()`` on exit, even after an error."""

    def start(self: Started) -> Started:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: Started) -> Started:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class LocalKafka(StartStop):
    """A single-node KRaft broker listening on 127.0.0.1, owned by this process.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        libs_dir: Path = DEFAULT_LIBS_DIR,
        conf_dir: Path = DEFAULT_CONF_DIR,
        heap: str = "768m",
        controller_port: int | None = None,
        cluster_id: str | None = None,
        overrides: Mapping[str, str] | None = None,
        request_log: bool = False,
    ) -> None:
        """``cluster_id`` and ``overrides`` (properties that replace the template's; their ``{port}``,
        ``{controller_port}`` and ``{data_dir}`` are filled as the template's are) let several
        nodes form one cluster (see tests/harness/local_cluster.py). With ``request_log``, the broker
        writes a line for every request it completes to :attr:`request_log_file` (Kafka's request logger)."""
        self.data_dir = Path(data_dir).resolve()
        self.port = port or free_loopback_port()
        self.controller_port = controller_port or free_loopback_port()
        self.libs_dir = Path(libs_dir)
        self.conf_dir = Path(conf_dir)
        self.heap = heap
        self.overrides = dict(overrides or {})
        self._given_cluster_id = cluster_id
        self.request_log = request_log
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"

    @property
    def request_log_file(self) -> Path:
        return self.data_dir / "requests.log"

    def _log4j_configuration(self) -> Path:
        template = self.conf_dir / "kafka-log4j2.properties"
        if not self.request_log:
            return template
        path = self.data_dir / "kafka-log4j2.properties"
        path.write_text(template.read_text() + _REQUEST_LOGGER.format(file=self.request_log_file))
        return path

    def _java_command(self, main_class: str, *args: str) -> list[str]:
        if not any(self.libs_dir.glob("kafka_2.13-*.jar")):
            raise LocalKafkaError(
                f"No Kafka broker jars in {self.libs_dir}. Run `make kafka-jars` (needs Maven) first."
            )
        return [
            java_executable(),
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self._log4j_configuration()}",
            f"-Dkafka.logs.dir={self.data_dir}",
            "-cp",
            f"{self.libs_dir}/*",
            main_class,
            *args,
        ]

    def _write_properties(self) -> Path:
        template = (self.conf_dir / "kafka-broker.properties").read_text()
        kept = [line for line in template.splitlines() if line.split("=", 1)[0].strip() not in self.overrides]
        text = "\n".join(kept + [f"{key}={value}" for key, value in self.overrides.items()]) + "\n"
        path = self.data_dir / "server.properties"
        path.write_text(
            text.replace("{port}", str(self.port))
            .replace("{controller_port}", str(self.controller_port))
            .replace("{data_dir}", str(self.data_dir))
        )
        return path

    def _cluster_id(self) -> str:
        """The data directory's cluster id, made once: a restarted broker keeps its data."""
        path = self.data_dir / "cluster.id"
        if not path.exists():
            path.write_text(self._given_cluster_id or _random_cluster_id())
        return path.read_text().strip()

    def start(self, timeout_s: float = 90.0) -> LocalKafka:
        """Format the data directory (once), start the broker and wait until it serves."""
        self.launch()
        self.wait_until_serving(timeout_s)
        return self

    @property
    def running(self) -> bool:
        """Whether the broker process this object started is still alive."""
        return self._process is not None and self._process.poll() is None

    def ended(self) -> tuple[int, int] | None:
        """(pid, exit code) of the broker process this object started, once it has ended on its own; None while it
        runs or when none was started."""
        if self._process is None or self.running:
            return None
        return self._process.pid, self._process.returncode

    def launch(self) -> None:
        """Format the data directory (once) and start the broker process, without waiting for it."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        properties = self._write_properties()
        formatted = subprocess.run(
            self._java_command(
                "kafka.tools.StorageTool", "format", f"--cluster-id={self._cluster_id()}", "-c", str(properties),
                "--ignore-formatted",
            ),
            capture_output=True,
            text=True,
        )
        if formatted.returncode != 0:
            raise LocalKafkaError(f"Formatting {self.data_dir} failed:\n{formatted.stdout}{formatted.stderr}")
        stdout = open(self.data_dir / "stdout.log", "ab")
        self._process = subprocess.Popen(
            self._java_command("kafka.Kafka", str(properties)),
            stdout=stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        stdout.close()
        (self.data_dir / "broker.pid").write_text(str(self._process.pid))

    def wait_until_serving(self, timeout_s: float) -> None:
        """Wait until the broker answers metadata requests; stop it and raise (naming its log) if
        it exits or does not answer within ``timeout_s``."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout_s
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise LocalKafkaError(
                    f"Kafka exited with code {self._process.returncode} while starting; see {self.log_file}"
                )
            try:
                metadata = admin.list_topics(timeout=2)
                if metadata.brokers:
                    return
            except Exception:  # noqa: BLE001 - not serving yet; retried until the deadline
                time.sleep(0.3)
        self.stop()
        raise LocalKafkaError(f"Kafka did not serve on {self.bootstrap_servers} within {timeout_s}s; see {self.log_file}")

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL), leaving no process behind."""
        if self._process is None:
            return
        _terminate(self._process.pid, timeout_s, lambda: not self.running)
        self._reap()

    def kill(self, timeout_s: float = 10.0) -> int:
        """SIGKILL the broker (a crash: no controlled shutdown) and return its exit code."""
        if self._process is None:
            raise LocalKafkaError(f"the broker on {self.bootstrap_servers} is not running")
        try:
            os.killpg(self._process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return self._reap(timeout_s)

    def _reap(self, timeout_s: float | None = None) -> int:
        assert self._process is not None
        code = self._process.wait(timeout_s)
        self._process = None
        (self.data_dir / "broker.pid").unlink(missing_ok=True)
        return code


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _terminate(pid: int, timeout_s: float, has_exited: Callable[[], bool] | None = None) -> None:
    """SIGTERM the process group of ``pid``, then SIGKILL it if it outlives ``timeout_s``."""

    def exited() -> bool:
        return has_exited() if has_exited is not None else not _pid_alive(pid)

    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if exited():
                return
            time.sleep(0.2)


def running_pid(data_dir: Path) -> int | None:
    """The pid of a broker started from the command line on ``data_dir`` that is still alive."""
    pid_file = Path(data_dir) / "broker.pid"
    if pid_file.exists() and _pid_alive(int(pid_file.read_text())):
        return int(pid_file.read_text())
    return None


def stop_by_pid_file(data_dir: Path, timeout_s: float = 30.0) -> bool:
    """Stop the broker whose pid file is in ``data_dir`` (started by an earlier command); False if none."""
    pid_file = Path(data_dir) / "broker.pid"
    if not pid_file.exists():
        return False
    _terminate(int(pid_file.read_text()), timeout_s)
    pid_file.unlink(missing_ok=True)
    return True


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.local_kafka", description=__doc__)
    parser.add_argument("command", choices=["start", "stop", "check-java"])
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".cache" / "kafka" / "data")
    parser.add_argument("--libs-dir", type=Path, default=DEFAULT_LIBS_DIR)
    args = parser.parse_args(argv)
    try:
        if args.command == "check-java":
            print(f"Java OK: {java_executable()}")
        elif args.command == "start":
            pid = running_pid(args.data_dir)
            if pid is not None:
                print(f"Kafka already running (pid {pid}) with data in {args.data_dir}")
                return 0
            broker = LocalKafka(args.data_dir, port=args.port, libs_dir=args.libs_dir).start()
            assert broker._process is not None
            print(f"Kafka {broker.bootstrap_servers} running (pid {broker._process.pid}), log {broker.log_file}")
        else:
            print("Kafka stopped" if stop_by_pid_file(args.data_dir) else "Kafka is not running (no pid file)")
    except LocalKafkaError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
