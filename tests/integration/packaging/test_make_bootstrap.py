"""``make test`` / ``make demo`` stop with a clear message when Java 17+ or Maven is missing (README, top).

The Makefile's own targets run with a PATH that lacks the tool (a directory holding only what the case
keeps), JAVA_HOME unset, and the jar directories pointed into a temporary directory, so that nothing
the repository has resolved is touched. No broker, no Spark.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[3]


def run_make(tmp_path: Path, keep: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``make -C <project> args`` with PATH holding only ``keep`` (name -> the program it stands for)
    and no JAVA_HOME."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, program in keep.items():
        (bin_dir / name).symlink_to(program)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(bin_dir)
    return subprocess.run([real("make"), "-C", str(PROJECT), *args], capture_output=True, text=True, env=env, timeout=300)


def real(program: str) -> str:
    """Where ``program`` is on the test's own PATH."""
    found = shutil.which(program)
    assert found is not None, f"the tests need {program} on PATH"
    return found


def test_make_java_without_java_stops_naming_java_17_and_how_to_install(tmp_path: Path) -> None:
    done = run_make(tmp_path, {}, f"PYTHON={sys.executable}", "java")
    assert done.returncode == 2
    assert "error: Java 17+ is required (for Kafka and Spark) and was not found on PATH or JAVA_HOME" in done.stderr
    assert "apt-get install openjdk-17-jdk-headless" in done.stderr


def test_make_java_with_a_java_older_than_17_stops_naming_it(tmp_path: Path) -> None:
    """A ``java`` that is Java 11 (what ``java -version`` of an OpenJDK 11 prints)."""
    old_java = tmp_path / "jdk-11" / "java"
    old_java.parent.mkdir()
    old_java.write_text('#!/bin/bash\necho \'openjdk version "11.0.22" 2024-01-16\' >&2\n')
    old_java.chmod(0o755)
    done = run_make(tmp_path, {"java": str(old_java)}, f"PYTHON={sys.executable}", "java")
    assert done.returncode == 2
    assert "Java 17+ is needed to run Kafka 4.x, but" in done.stderr and "is Java 11. Point JAVA_HOME at a JDK 17+." in done.stderr


def test_make_kafka_jars_without_maven_stops_naming_maven_and_how_to_install(tmp_path: Path) -> None:
    libs = tmp_path / "kafka-libs"
    done = run_make(tmp_path, {"java": real("java"), "rm": real("rm")}, f"PYTHON={sys.executable}", f"KAFKA_LIBS={libs}", "kafka-jars")
    assert done.returncode == 2
    assert "Java OK" in done.stdout, "the Java check passed first"
    assert ("error: Maven (mvn) is required to fetch the Kafka broker jars from Maven Central. "
            "Install it, e.g. apt-get install maven") in done.stderr
    assert not libs.exists()


def test_make_of_sparks_kafka_connector_without_maven_stops_naming_maven(tmp_path: Path) -> None:
    """The test oracle's jars (a prerequisite of ``make test``) are fetched with Maven too."""
    jars = tmp_path / "spark-kafka-jars"
    done = run_make(tmp_path, {"rm": real("rm")}, f"SPARK_KAFKA_JARS={jars}", f"{jars}/.resolved")
    assert done.returncode == 2
    assert ("error: Maven (mvn) is required to fetch Spark's Kafka connector from Maven Central. "
            "Install it, e.g. apt-get install maven") in done.stderr
    assert not jars.exists()
