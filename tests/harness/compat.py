"""Virtualenvs with an older pyspark, for the Spark-version tier: pyspark (with its Connect client's
dependencies) is installed first (as a cluster's runtime provides it), then the package with a plain ``pip install``, which must keep it.
Each runs the Python of the runtime it stands for (Databricks 17.3 LTS and 18 LTS run Python 3.12).

The virtualenvs are kept under ``~/.cache/spark-kafka-eos/compat/`` (a cold build downloads pyspark, about
450 MB); the package itself is installed again on every use, so that it is the working tree's."""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
# In the user's cache, not the working tree's: a clean clone (CI's) then finds the virtualenvs a run of
# another clone made; only the package is installed anew. $KAFKA_EOS_CACHE_DIR moves it.
CACHE = Path(os.environ.get("KAFKA_EOS_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
             / "spark-kafka-eos") / "compat"
# (pyspark, Python) of the tier. Databricks Runtime 17.3 LTS is Spark 4.0 on Python 3.12, 18 LTS Spark 4.1
# on 3.12; 4.2 runs on the newest Python, 3.13. The main suite is pyspark 4.3 on Python 3.11; the wheel
# test (long tier) installs on 3.10. Java is the machine's, 17.
OLDER_SPARKS = [("4.2.1", "3.13"), ("4.1.4", "3.12"), ("4.0.5", "3.12")]
# Without the test session's PYTHONPATH (the repository, whose spark_kafka_eos.egg-info would make pip
# take the package for installed), its virtualenv and Spark's Python settings.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}


@dataclass(frozen=True)
class CompatVenv:
    """A virtualenv whose pyspark is ``pyspark_version``, with the package installed beside it."""

    pyspark_version: str
    path: Path
    pyspark_after_install: str
    """``pyspark.__version__`` once the package was installed with a plain ``pip install``."""

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def run(self, *args: str, cwd: Path, timeout_s: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run this virtualenv's Python with ``args``, from ``cwd``, without the test session's settings."""
        return subprocess.run([str(self.python), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout_s,
                              env={**CLEAN_ENV, **(env or {})})


@contextmanager
def _exclusive(name: str) -> Iterator[None]:
    """Held by one test process at a time (``make test`` runs two workers): a build in the working tree, or
    one virtualenv's installs."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args], capture_output=True, text=True,
                          timeout=1200, env=CLEAN_ENV)
    if done.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")


def find_python(minor: str) -> Path:
    """A ``python<minor>`` (e.g. ``3.12``) on PATH, or one pyenv installed; a clear error without one."""
    candidates = [shutil.which(f"python{minor}"), *sorted(str(p) for p in (Path.home() / ".pyenv" / "versions").glob(f"{minor}.*/bin/python{minor}"))]
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "--version"], capture_output=True, timeout=60).returncode == 0:
            return Path(candidate)
    raise RuntimeError(f"The Spark-version tier needs Python {minor} and found none (PATH, ~/.pyenv/versions). "
                       f"Install it, e.g. `pyenv install {minor}` or `apt-get install python{minor}-venv`.")


@functools.cache
def project_wheel() -> Path:
    """The working tree's package as a wheel, built once per test session (a build costs seconds; every
    virtualenv of the tier installs it, as a user installs the published wheel)."""
    out = Path(tempfile.mkdtemp(prefix="kafka-eos-wheel-"))
    with _exclusive("working-tree-build"):  # setuptools builds in the tree's build/
        done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "wheel", "--no-deps", "-w", str(out),
                               str(PROJECT)], capture_output=True, text=True, timeout=600, env=CLEAN_ENV)
        shutil.rmtree(PROJECT / "build", ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"pip wheel {PROJECT} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    [wheel] = out.glob("spark_kafka_eos-*.whl")
    return wheel


def compat_venv(pyspark_version: str, python_version: str) -> CompatVenv:
    """The virtualenv for ``pyspark_version`` on Python ``python_version`` (made once), with the working
    tree's package installed by a plain ``pip install`` of its wheel (dependencies resolved as a user's would
    be), then reinstalled from it (the version number does not tell one working tree from another)."""
    path = CACHE / f"pyspark-connect-{pyspark_version}-py{python_version}"
    python = path / "bin" / "python"
    ready = path / ".pyspark-connect-installed"
    wheel = str(project_wheel())
    with _exclusive(path.name):
        if not ready.exists():
            subprocess.run([str(find_python(python_version)), "-m", "venv", "--clear", str(path)], check=True, timeout=300)
            # With the Connect client's dependencies, as the runtimes have them (Databricks' shared clusters).
            _pip(python, "install", f"pyspark[connect]=={pyspark_version}")
            ready.touch()
        _pip(python, "install", wheel)
        _pip(python, "install", "--no-deps", "--force-reinstall", wheel)
        found = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('pyspark'))"],
                               capture_output=True, text=True, timeout=120, env=CLEAN_ENV, cwd=CACHE)
    return CompatVenv(pyspark_version, path, found.stdout.strip())
