"""``python -m build`` gives an sdist and a wheel; the wheel, installed into a fresh virtualenv of the
oldest Python the package declares (3.10), reads and writes with ``format("kafka_eos")`` and no
registration call, with nothing from the repository on its path."""

from __future__ import annotations

import json
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
