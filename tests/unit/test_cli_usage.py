"""The CLI names itself ``kafka-eos`` in its usage and help, however it was started."""

from __future__ import annotations

import json
import sys

import pytest

from spark_kafka_eos.cli import build_parser, main


def test_usage_names_the_kafka_eos_command() -> None:
    assert build_parser().format_usage().startswith("usage: kafka-eos ")


@pytest.mark.parametrize("argv", [["--help"], ["recover", "--help"]])
def test_help_names_the_kafka_eos_command(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: kafka-eos ") and "spark_kafka_eos.cli" not in out.splitlines()[0]


def test_the_exporter_without_prometheus_client_says_how_to_install_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # an import of it raises ImportError
    assert main(["exporter", "--bootstrap-servers", "127.0.0.1:9", "--once", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "error: kafka-eos exporter needs prometheus-client: pip install 'spark-kafka-eos[exporter]'\n"
    assert json.loads(captured.out) == {"command": "exporter", "exit_code": 2, "error": captured.err[len("error: "):].strip()}
