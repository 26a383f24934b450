"""The troubleshooting page (docs/troubleshooting.md) is written by hand and cannot drift: every public error
class of spark_kafka_eos.errors has a section of its own, and every exit code of the kafka-eos command a row."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import spark_kafka_eos
from spark_kafka_eos import errors
from spark_kafka_eos._internal.ops import console as cli

PAGE = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"


def public_error_classes() -> list[str]:
    """The exception classes spark_kafka_eos.errors defines, each exported by the package."""
    found = [name for name, value in vars(errors).items()
             if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == errors.__name__]
    assert found, "no error class found in spark_kafka_eos.errors"
    assert set(found) <= set(spark_kafka_eos.__all__), "an error class that the package does not export"
    return sorted(found)


def test_every_public_error_class_has_a_section_of_its_own() -> None:
    sections = re.findall(r"^#{2,4} `(\w+)`$", PAGE.read_text(), flags=re.MULTILINE)
    assert sorted(sections) == public_error_classes()


def test_every_commit_outcome_is_in_the_re_run_table_with_its_class() -> None:
    page = PAGE.read_text()
    for error in (errors.KafkaEosEpochAbortedError, errors.KafkaEosRunRefusedError, errors.KafkaEosEpochCommittedError,
                  errors.KafkaEosCommitOutcomeUnknownError):
        safe = "yes" if error.outcome.rerun_safe else "no"
        assert re.search(rf"^\| `{error.outcome.value}` \| {safe}\b.*\| `{error.__name__}` \|$", page, flags=re.MULTILINE), error
    assert {e.__name__ for e in errors.KafkaEosCommitError.__subclasses__()} == {
        "KafkaEosEpochAbortedError", "KafkaEosRunRefusedError", "KafkaEosEpochCommittedError",
        "KafkaEosCommitOutcomeUnknownError"}


def test_every_exit_code_of_the_command_has_a_row() -> None:
    page = PAGE.read_text()
    codes = {value for name, value in vars(cli).items() if name.startswith("EXIT_") and isinstance(value, int)}
    rows = {int(code) for code in re.findall(r"^\| (\d) \|", page, flags=re.MULTILINE)}
    assert rows == codes
    for outcome, code in cli._EXIT_BY_OUTCOME.items():
        assert re.search(rf"^\| {code} \|.*\| `{outcome.value}` \|$", page, flags=re.MULTILINE), outcome
