"""The CLI names itself ``kafka-eos`` in its usage and help, however it was started; it takes its options where Kafka's
tools do (``--version``, ``--command-config``, the environment, ``--json`` anywhere)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from spark_kafka_eos import __version__
from spark_kafka_eos._internal.ops.console import DEFAULT_TIMEOUT_S, build_parser, client_settings, main


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


def test_version_is_the_packages(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"kafka-eos {__version__}\n"


@pytest.mark.parametrize("argv", [
    ["--json", "--timeout", "7", "--verbose", "--command-config", "c.properties", "list", "--bootstrap-servers", "b:9"],
    ["list", "--bootstrap-servers", "b:9", "--json", "--timeout", "7", "--verbose", "--command-config", "c.properties"],
])
def test_json_timeout_verbose_and_command_config_go_anywhere_on_the_line(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert (args.json, args.timeout, args.verbose, args.command_config) == (True, 7.0, True, "c.properties")


def test_defaults_when_not_given() -> None:
    args = build_parser().parse_args(["list", "--bootstrap-servers", "b:9"])
    assert (args.json, args.timeout, args.verbose, args.command_config) == (False, DEFAULT_TIMEOUT_S, False, None)


def test_settings_come_from_the_file_then_the_environment_then_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "client.properties"
    config.write_text("sasl.username=from-file\nsasl.password=file-secret\nssl.ca.location=/ca.pem\n")
    monkeypatch.setenv("KAFKA_EOS_KAFKA_SASL_PASSWORD", "env-secret")
    monkeypatch.setenv("KAFKA_EOS_KAFKA_SASL_USERNAME", "from-env")
    args = build_parser().parse_args(["list", "--bootstrap-servers", "b:9", "--command-config", str(config),
                                      "--kafka", "sasl.username=from-line", "--timeout", "4"])
    assert client_settings(args) == {"sasl.username": "from-line", "sasl.password": "env-secret",
                                     "ssl.ca.location": "/ca.pem", "socket.timeout.ms": "4000"}


def test_a_missing_command_config_is_one_line_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.properties"
    assert main(["list", "--bootstrap-servers", "127.0.0.1:9", "--command-config", str(missing)]) == 2
    assert capsys.readouterr().err == f"error: cannot read --command-config {missing}: No such file or directory\n"
