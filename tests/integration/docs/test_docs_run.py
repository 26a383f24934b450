"""Every code block of the README and the docs site runs as a user types it (tests/harness/doc_blocks.py), on a
broker of its own (so that the pages' topic and prefix names are new), in page order: a later page's commands act on
what an earlier page's pipeline made, as a reader who follows the README would.

- Python blocks run in the page's namespace, with ``spark`` (the test session, Spark's avro package on it). After a
  block, each streaming query it started reads all that is available and is stopped.
- Shell blocks: ``kafka-eos`` commands run (``exporter`` without ``--once`` serves until one scrape has answered),
  and must exit with the code the line's comment states (0 unless it says); ``make T`` is ``make -n T`` (the
  target exists and its recipe expands: this suite is ``make test``, and ``make demo`` has a test of its own,
  packaging/test_notebooks.py); ``pip install`` names this project's wheel or one of its extras.
- YAML blocks (Prometheus alert rules) name only series the exporter serves.

Then what the pipelines wrote is counted by an independent read_committed consumer: every record once.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import tomllib
import yaml
from confluent_kafka.admin import NewTopic
from pyspark.sql import SparkSession

from tests.harness.doc_blocks import PAGES, ROOT, Block, Command, blocks, commands, substituted
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.local_kafka import LocalKafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

TOPICS = {"orders": 2, "out": 2, "orders-upper": 2, "order-counts": 2, "orders-migrated": 2}
"""The topics the pages read and write, made before the first block (the sink does not create topics), and
``orders`` filled."""
ORDERS = [f"order-{i}" for i in range(20)]
SCRAPE_TIMEOUT_S = 60.0


@dataclass
class Typed:
    """What running every page's blocks gave."""

    bootstrap_servers: str
    failures: dict[str, str] = field(default_factory=dict)
    """Block (page:line) -> what went wrong."""
    ran: list[str] = field(default_factory=list)
    scrape: str = ""


def _kafka_eos(words: list[str]) -> list[str]:
    return [str(Path(sys.executable).with_name("kafka-eos")), *words[1:]]


def _serve_until_scraped(words: list[str]) -> str:
    """Start a serving exporter, wait for one scrape of its /metrics, stop it; the scrape."""
    port = words[words.index("--port") + 1] if "--port" in words else "10464"
    server = subprocess.Popen(_kafka_eos(words), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + SCRAPE_TIMEOUT_S
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
                    return str(answer.read().decode())
            except OSError as err:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the exporter served no scrape (exit {server.poll()}): {err}; "
                                         f"stderr: {server.communicate(timeout=10)[1][-2000:]}") from err
                time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(30)


def _check_pip(command: Command) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"])
    wheel = f"{project['name'].replace('-', '_')}-<version>-py3-none-any.whl"
    for word in command.words[2:]:
        named = re.fullmatch(r"([\w.-]+)\[(\w+)\]", word)
        if named:
            assert named.group(1) == project["name"] and named.group(2) in extras, f"no extra {word} in pyproject.toml"
        else:
            assert word == wheel, f"{word} is not the wheel `python -m build` makes ({wheel})"


def _run_command(command: Command, typed: Typed) -> None:
    words = command.words
    if words[0] == "make":
        done = subprocess.run(["make", "-n", *words[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"make -n {' '.join(words[1:])}: {done.stderr[-1000:]}"
    elif words[:2] == ["pip", "install"]:
        _check_pip(command)
    elif words[0] == "kafka-eos" and words[1] == "exporter" and "--once" not in words:
        typed.scrape = _serve_until_scraped(words)
        assert "kafka_eos_exporter_up 1.0" in typed.scrape, typed.scrape[-2000:]
    else:
        assert words[0] == "kafka-eos", f"a shell line this harness cannot run: {command.line}"
        done = subprocess.run(_kafka_eos(words), capture_output=True, text=True, timeout=180)
        assert done.returncode == command.exit_code, (
            f"exit code {done.returncode}, the page says {command.exit_code}; stdout: {done.stdout[-1500:]} "
            f"stderr: {done.stderr[-1500:]}")


def _run_python(block: Block, text: str, namespace: dict[str, object], spark: SparkSession) -> None:
    exec(compile(text, block.where, "exec"), namespace)  # noqa: S102 - the docs' own code, as a user runs it
    for query in spark.streams.active:
        query.processAllAvailable()
        query.stop()


def _run_yaml(text: str, typed: Typed) -> None:
    rules = [rule for group in yaml.safe_load(text)["groups"] for rule in group["rules"]]
    served = set(re.findall(r"^# TYPE (kafka_eos_\w+)", typed.scrape, re.MULTILINE))
    assert served, "no scrape to check the alert rules against (the pages serve the exporter before their rules)"
    for rule in rules:
        for series in re.findall(r"kafka_eos_\w+", rule["expr"]):
            assert series in served, f"alert {rule['alert']} names {series}, which the exporter does not serve"
    _promtool_test_rules(text)


PROMTOOL = ROOT / ".cache" / "promtool" / "promtool"
"""Prometheus's promtool, built by make from the Go module proxy."""
RULES_TEST = Path(__file__).with_name("alert_rules_test.yml")


def _promtool_test_rules(text: str) -> None:
    """The page's rules pass ``promtool check rules``, and ``promtool test rules`` (alert_rules_test.yml: series for
    which an alert must fire, and must not)."""
    assert PROMTOOL.exists(), f"{PROMTOOL} is missing: make test builds it (Go module proxy)"
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / "rules.yml").write_text(text)
        (Path(directory) / "test.yml").write_text(RULES_TEST.read_text())
        for command in (["check", "rules", "rules.yml"], ["test", "rules", "test.yml"]):
            done = subprocess.run([str(PROMTOOL), *command], cwd=directory, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, f"promtool {' '.join(command)}: {done.stdout[-2000:]} {done.stderr[-2000:]}"


@pytest.fixture(scope="module")
def typed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Typed]:
    broker = LocalKafka(tmp_path_factory.mktemp("docs-kafka")).start()
    checkpoints = tmp_path_factory.mktemp("docs-checkpoints")
    try:
        kafka = KafkaTestCluster(broker.bootstrap_servers)
        for topic, partitions in TOPICS.items():
            kafka.admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
        kafka.produce_plain("orders", [Sent(i % 2, f"k{i}".encode(), value.encode()) for i, value in enumerate(ORDERS)])
        result = Typed(broker.bootstrap_servers)
        for page in PAGES:
            namespace: dict[str, object] = {"spark": spark}
            for block in blocks(page):
                text = substituted(block.text, broker.bootstrap_servers, checkpoints)
                try:
                    if block.language == "python":
                        _run_python(block, text, namespace, spark)
                    elif block.language == "bash":
                        for command in commands(Block(block.page, block.line, block.language, text)):
                            _run_command(command, result)
                    elif block.language == "yaml":
                        _run_yaml(text, result)
                    else:
                        raise AssertionError(f"a block in {block.language or 'no language'}: say which, and run it here")
                    result.ran.append(block.where)
                except Exception as err:  # noqa: BLE001 - every block's failure is reported, by its page and line
                    result.failures[block.where] = f"{type(err).__name__}: {err}"[:3000]
                    for query in spark.streams.active:
                        query.stop()
        result.bootstrap_servers = broker.bootstrap_servers
        yield result
    finally:
        broker.kill()


@pytest.mark.parametrize("page", [str(p.relative_to(ROOT)) for p in PAGES if blocks(p)])
def test_every_block_of_the_page_runs_as_typed(typed: Typed, page: str) -> None:
    failed = {where: why for where, why in typed.failures.items() if where.startswith(f"{page}:")}
    assert not failed, "\n".join(f"{where}: {why}" for where, why in failed.items())
    assert any(where.startswith(f"{page}:") for where in typed.ran)


def test_the_pages_pipelines_wrote_every_record_once(typed: Typed) -> None:
    """README's and the writing page's stream (one checkpoint: one query), the writing page's backfill, the
    getting-started pipeline and the writing page's streaming aggregation, counted by an independent read_committed
    consumer."""
    kafka = KafkaTestCluster(typed.bootstrap_servers)
    out = Counter((r.value or b"").decode() for r in kafka.read_committed("out"))
    assert out == Counter([*ORDERS, "v1", "v2"])
    upper = Counter((r.value or b"").decode() for r in kafka.read_committed("orders-upper"))
    assert upper == Counter(value.upper() for value in ORDERS)
    # The migrating page's query: Spark's Kafka sink, then kafka_eos on its checkpoint.
    migrated = Counter((r.value or b"").decode() for r in kafka.read_committed("orders-migrated"))
    assert migrated == Counter(ORDERS)
    # The writing page's streaming aggregation (foreachBatch, Update mode): every order's key once, counted once.
    counts = Counter(((r.key or b"").decode(), (r.value or b"").decode()) for r in kafka.read_committed("order-counts"))
    assert counts == Counter((f"k{i}", "1") for i in range(len(ORDERS)))


def test_the_harness_runs_a_block_of_every_page_that_has_one() -> None:
    """A page whose blocks the harness skips would drift unseen: every block is in a language it runs."""
    languages = Counter(block.language for page in PAGES for block in blocks(page))
    assert set(languages) <= {"python", "bash", "yaml"}, languages
    assert languages["python"] >= 5 and languages["bash"] >= 5
