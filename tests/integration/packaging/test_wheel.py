"""``python -m build`` gives an sdist and a wheel; the wheel, installed into a fresh virtualenv of the
oldest Python the package declares (3.10), reads and writes with ``format("kafka_eos")`` and no
registration call, with nothing from the repository on its path. ``make wheels`` adds the compiled paths' wheel,
which installs (``pip install 'spark-kafka-eos[native]'``) and runs with no Rust toolchain on PATH."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.harness.compat import CLEAN_ENV, PROJECT, find_python
from tests.harness.kafka import KafkaTestCluster, Sent

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.long]

OLDEST_PYTHON = "3.10"  # requires-python in pyproject.toml


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=CLEAN_ENV, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def metadata_version(sdist_name: str) -> str:
    return sdist_name.removeprefix("spark_kafka_eos-").removesuffix(".tar.gz")


def test_the_wheel_alone_reads_and_writes(kafka: KafkaTestCluster, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(dist), str(PROJECT)])
    [wheel], [sdist] = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    shipped = zipfile.ZipFile(wheel).namelist()
    assert "pyspark_kafka_eos/__init__.py" in shipped and "spark_kafka_eos/datasource.py" in shipped
    assert not [n for n in shipped if n.startswith(("tests/", "notebooks/", "conf/")) or "local_kafka" in n], shipped
    entry_points = next(n for n in shipped if n.endswith("entry_points.txt"))
    assert "kafka-eos = spark_kafka_eos.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()

    venv = tmp_path / "venv"
    run([str(find_python(OLDEST_PYTHON)), "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "--quiet", f"{wheel}[spark]"])  # a local user: no runtime provides pyspark
    assert "usage" in run([str(venv / "bin" / "kafka-eos"), "--help"]).stdout

    source, sink = kafka.create_topic(2), kafka.create_topic(2)
    kafka.produce_plain(source, [Sent(i % 2, b"k%d" % i, b"v%d" % i) for i in range(20)])
    script = tmp_path / "wheel_job.py"  # a copy, so that nothing of the repository is on the job's path
    script.write_text((PROJECT / "tests" / "harness" / "wheel_job.py").read_text())
    job = run([str(python), str(script), kafka.bootstrap_servers, source, sink], cwd=tmp_path)
    result = json.loads([line for line in job.stdout.splitlines() if line.startswith("{")][-1])
    assert result["package"].startswith(str(venv)), result  # the wheel's copy, not the repository's
    assert result["read"] == 20
    assert run([str(python), "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"]).stdout.strip() == OLDEST_PYTHON
    assert result["version"] == metadata_version(sdist.name)
    assert sorted(r.value for r in kafka.read_committed(sink)) == sorted(b"v%d" % i for i in range(20))


def without_toolchain(env: dict[str, str]) -> dict[str, str]:
    """``env`` with no directory on PATH that holds cargo or rustc (a Databricks cluster, a user's laptop)."""
    path = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                           if d and not any(Path(d, tool).exists() for tool in ("cargo", "rustc")))
    assert shutil.which("cargo", path=path) is None and shutil.which("rustc", path=path) is None
    return {**env, "PATH": path, "CARGO_HOME": "/nonexistent", "RUSTUP_HOME": "/nonexistent"}


def test_make_wheels_gives_a_compiled_wheel_that_installs_and_runs_without_a_toolchain(kafka: KafkaTestCluster, tmp_path: Path) -> None:
    run(["make", "--no-print-directory", "-s", "wheels"], cwd=PROJECT)
    dist = tmp_path / "dist"
    shutil.copytree(PROJECT / "dist", dist)
    [package] = sorted(dist.glob("spark_kafka_eos-*.whl"))
    [compiled] = sorted(dist.glob("spark_kafka_eos_native-*.whl"))
    assert "-abi3-manylinux" in compiled.name, compiled.name  # one wheel for every CPython from 3.10, a manylinux tag
    shipped = zipfile.ZipFile(compiled).namelist()
    assert not [n for n in shipped if n.endswith(".so") and "rdkafka" in n], shipped  # librdkafka linked in, not beside

    env = without_toolchain(CLEAN_ENV)
    venv = tmp_path / "venv"
    run([str(find_python(OLDEST_PYTHON)), "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    installed = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--find-links", str(dist), f"{package}[spark,native]"],
                               capture_output=True, text=True, timeout=900, env=env)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]

    source, sink = kafka.create_topic(2), kafka.create_topic(2)
    kafka.produce_plain(source, [Sent(i % 2, b"k%d" % i, b"v%d" % i) for i in range(20)])
    script = tmp_path / "wheel_job.py"
    script.write_text((PROJECT / "tests" / "harness" / "wheel_job.py").read_text())
    job = subprocess.run([str(python), str(script), kafka.bootstrap_servers, source, sink, "native"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=900, env=env)
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    result = json.loads([line for line in job.stdout.splitlines() if line.startswith("{")][-1])
    assert result["native"] and result["native"].startswith(str(venv)), result  # the compiled paths, from the wheel
    assert result["read"] == 20
    assert sorted(r.value for r in kafka.read_committed(sink)) == sorted(b"v%d" % i for i in range(20))
