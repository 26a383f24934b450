"""A failed commit states its outcome: as a class, as ``outcome`` / ``rerun_safe``, as a tag in its message that
survives Spark's wrapping of Python errors, and as the command line tool's exit code."""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from spark_kafka_eos._internal.ops import console as cli
from spark_kafka_eos._internal.write.commit_outcomes import Ending
from spark_kafka_eos.errors import (
    CommitOutcome,
    KafkaEosCommitError,
    KafkaEosCommitOutcomeUnknownError,
    KafkaEosEpochAbortedError,
    KafkaEosEpochCommittedError,
    KafkaEosRunRefusedError,
    KafkaEosWriteError,
    commit_outcome,
)

OUTCOMES: list[tuple[type[KafkaEosCommitError], CommitOutcome, bool, int]] = [
    (KafkaEosEpochAbortedError, CommitOutcome.ABORTED, True, 2),
    (KafkaEosRunRefusedError, CommitOutcome.REFUSED, True, 1),
    (KafkaEosEpochCommittedError, CommitOutcome.COMMITTED, False, 3),
    (KafkaEosCommitOutcomeUnknownError, CommitOutcome.UNKNOWN, False, 4),
]


@pytest.mark.parametrize(("error_class", "outcome", "rerun_safe", "exit_code"), OUTCOMES)
def test_each_error_states_its_outcome_and_whether_a_re_run_is_safe(
    error_class: type[KafkaEosCommitError], outcome: CommitOutcome, rerun_safe: bool, exit_code: int
) -> None:
    error = error_class("Epoch 3 of prefix 'p' went somewhere.")

    assert isinstance(error, KafkaEosCommitError)
    assert (error.outcome, error.rerun_safe) == (outcome, rerun_safe)
    assert str(error) == f"Epoch 3 of prefix 'p' went somewhere. [kafka-eos outcome: {outcome.value}; re-run safe: {'yes' if rerun_safe else 'no'}]"
    assert commit_outcome(error) is outcome


@pytest.mark.parametrize(("error_class", "outcome"), [(e, o) for e, o, _, _ in OUTCOMES])
def test_the_outcome_is_read_back_from_the_text_of_an_error_spark_wrapped(error_class: type[KafkaEosCommitError],
                                                                         outcome: CommitOutcome) -> None:
    inner = KafkaEosEpochCommittedError("an earlier decision is committed.")
    outer = error_class(f"rolling it forward failed: {inner}.")
    # What a StreamingQueryException's message holds: the Python traceback, causes first, the raised error last.
    wrapped = (f"[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Traceback (most recent call last):\n"
               f"spark_kafka_eos.errors.KafkaEosEpochCommittedError: {inner}\n\nThe above exception was the direct cause "
               f"of the following exception:\n\nspark_kafka_eos.errors.{error_class.__name__}: {outer}\n")

    assert commit_outcome(wrapped) is outcome
    assert commit_outcome(RuntimeError(wrapped)) is outcome


def test_other_errors_state_no_outcome() -> None:
    assert commit_outcome(KafkaEosWriteError("p-0", "the broker refused a record.", "fix it")) is None
    assert commit_outcome(RuntimeError("[kafka-eos outcome: maybe; re-run safe: yes]")) is None
    assert commit_outcome("") is None


@pytest.mark.parametrize(("error_class", "exit_code"), [(e, code) for e, _, _, code in OUTCOMES])
def test_the_command_line_tool_exits_with_the_code_of_the_outcome(
    error_class: type[KafkaEosCommitError], exit_code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def recover(options: Any, session: Any, args: argparse.Namespace) -> int:
        raise error_class("Epoch 3 of prefix 'p' went somewhere.")

    recover.__name__ = "recover_command"
    monkeypatch.setattr(cli, "recover_command", recover)
    monkeypatch.setattr(cli, "open_session", lambda connection: nullcontext())

    code = cli.main(["recover", "--bootstrap-servers", "127.0.0.1:9", "--prefix", "p"])

    assert code == exit_code
    assert capsys.readouterr().err.startswith("error: Epoch 3 of prefix 'p' went somewhere. [kafka-eos outcome: ")


def test_the_command_line_tool_exits_2_on_any_other_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def recover(options: Any, session: Any, args: argparse.Namespace) -> int:
        raise KafkaEosWriteError("p-0", "the broker refused a record.", "fix it")

    recover.__name__ = "recover_command"
    monkeypatch.setattr(cli, "recover_command", recover)
    monkeypatch.setattr(cli, "open_session", lambda connection: nullcontext())

    assert cli.main(["recover", "--bootstrap-servers", "127.0.0.1:9", "--prefix", "p"]) == 2


def operations_page_endings() -> list[tuple[str, str, str, str]]:
    """The rows of the operations page's table "How a commit ends": (when, what happened, outcome, participants)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    section = page[page.index("## How a commit ends"):]
    section = section[:section.index("\n## ")]
    rows = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ") and not line.startswith("| when ")]
    return [(when.strip(), happened, outcome.strip("`"), participants.strip()) for when, happened, outcome, participants in rows]


def test_the_operations_page_shows_the_coordinators_table_of_endings_row_for_row() -> None:
    assert operations_page_endings() == [(e.moment, e.happened, e.outcome.value, e.participants) for e in Ending]


@pytest.mark.parametrize("ending", list(Ending), ids=lambda e: e.name)
def test_each_ending_raises_the_error_of_its_outcome(ending: Ending) -> None:
    error = ending.error("what happened")
    assert error.outcome == ending.outcome and commit_outcome(str(error)) == ending.outcome
