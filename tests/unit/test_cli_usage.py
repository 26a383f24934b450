"""The CLI names itself ``kafka-eos`` in its usage and help, however it was started."""

from __future__ import annotations

import pytest

from spark_kafka_eos.cli import build_parser, main


def test_usage_names_the_kafka_eos_command() -> None:
    assert build_parser().format_usage().startswith("usage: kafka-eos ")


@pytest.mark.parametrize("argv", [["--help"], ["recover", "--help"]])
def test_help_names_the_kafka_eos_command(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: kafka-eos ") and "spark_kafka_eos.cli" not in out.splitlines()[0]
