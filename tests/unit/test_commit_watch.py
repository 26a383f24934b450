"""A commit that takes longer than its bound is logged with the calls it waits in; a quick one logs nothing."""

from __future__ import annotations

import logging
import time

import pytest

from spark_kafka_eos._internal.retry import Backoff, Deadline, wait_until
from spark_kafka_eos._internal.write import commit_watch
from spark_kafka_eos._internal.write.commit_watch import watched


def test_a_slow_commit_is_logged_with_what_it_waits_in(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=commit_watch.__name__)
    with watched("The commit of batch 7 of prefix p", every_s=0.1):
        wait_until(lambda: False, Deadline(0.35), Backoff(0.05))  # a call of the package that waits
    warnings = [r.getMessage() for r in caplog.records if r.name == commit_watch.__name__]
    assert len(warnings) >= 2, warnings
    assert warnings[0].startswith("The commit of batch 7 of prefix p has taken 0.1s so far; it waits in wait_until (retry.py:"), warnings


def test_a_quick_commit_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=commit_watch.__name__)
    with watched("The commit of batch 8 of prefix p", every_s=0.5):
        pass
    time.sleep(0.6)
    assert [r for r in caplog.records if r.name == commit_watch.__name__] == []
