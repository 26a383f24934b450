"""What a Spark task's new Python worker imports when it unpickles our reader or writer: its side's modules only.

Every module imported there is paid by each new worker (a second task of a micro-batch, a worker Spark started
again): kafka-python about 0.2 s, pandas (which pyarrow's ``pa.scalar`` and ``pa.array`` import) about 0.3 s, the
driver's coordinator 0.1 s, on this project's machine. Asserted by name, in a fresh interpreter, not by time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

READ_TASK = """
from spark_kafka_eos._internal.read.reader import KafkaEosBatchReader
from spark_kafka_eos._internal.read.record_batch import ConstantColumns
ConstantColumns("orders", 3).for_rows(5)
"""
WRITE_TASK = """
from spark_kafka_eos._internal.write.arrow_stream_writer import KafkaEosStreamWriter
from spark_kafka_eos._internal.write.writer import KafkaEosBatchWriter
"""


def imported_by(task: str) -> set[str]:
    code = f"import sys, json\nbefore = set(sys.modules)\n{task}\nprint(json.dumps(sorted(set(sys.modules) - before)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.parametrize(("task", "not_needed"), [
    (READ_TASK, ["kafka", "pandas", "spark_kafka_eos.datasource", "spark_kafka_eos._internal.write.coordinator",
                 "spark_kafka_eos._internal.txn.session"]),
    (WRITE_TASK, ["pandas", "spark_kafka_eos.datasource", "spark_kafka_eos._internal.write.coordinator",
                  "spark_kafka_eos._internal.read.offset_lookup"]),
], ids=["read task", "write task"])
def test_a_task_worker_imports_only_its_sides_modules(task: str, not_needed: list[str]) -> None:
    imported = imported_by(task)
    assert not imported & set(not_needed)


def test_the_public_name_still_imports_the_data_source() -> None:
    assert "spark_kafka_eos.datasource" in imported_by("from spark_kafka_eos import KafkaEosDataSource")
