"""A short fault soak (tests/harness/soak.py): one run of each fault kind, on a broker of its own. Every run
must hit its fault and end exactly once, with nothing open. The long soak is ``make soak``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.soak import KINDS, soak, summary

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_a_short_soak_of_each_fault_kind_is_exactly_once(tmp_path: Path) -> None:
    results = soak(seed=20261122, runs=len(KINDS), max_minutes=30, records=200, workdir=tmp_path, brokers=1)
    table = summary(results)
    assert sorted(r.kind for r in results) == sorted(KINDS), table
    assert all(r.hit for r in results), table
    assert all(r.ok for r in results), table
