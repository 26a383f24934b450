"""A job run through Spark Connect, in a process of its own.

``SparkSession.builder.remote("local[2]")`` starts a local Connect server inside this process's
JVM, so it cannot share a process with the test session's classic Spark. The test runs this
module as a script and judges the outcome with its own read_committed consumer.

    python -m tests.harness.connect_job BOOTSTRAP SOURCE BATCH_SINK STREAM_SINK CHECKPOINT PREFIX [FAIL_AT]

It prints a JSON line once its batch part is done: what the Connect session saw (including what a batch
write with ``mode("overwrite")`` and with the default save mode did before the ``append`` one); then,
after the stream, one with the stream's outcome too. ``FAIL_AT`` (test scaffolding, see
:mod:`tests.harness.faults`) makes the stream's sink fail there; ``<point>:kill-driver`` kills the
Connect server's JVM, the driver of every query of the session.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path


def main(bootstrap: str, source: str, batch_sink: str, stream_sink: str, checkpoint: str, prefix: str,
         fail_at: str = "") -> dict[str, object]:
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the server's Python workers need this package
    from pyspark.sql import SparkSession

    from tests.harness.compat_job import AVAILABLE_NOW_WRAPPER
    from tests.harness.faults import FAIL_AT_ENV, FAULTS_FORMAT, FaultInjectingDataSource

    if fail_at:
        os.environ[FAIL_AT_ENV] = fail_at  # before the server starts: its Python workers inherit it
    # pyspark's test mode: the local server binds a free port and the client asks it which (not 15002,
    # which another Connect server on the machine may hold).
    os.environ["SPARK_TESTING"] = "1"
    # On Spark 4.0/4.1 Trigger.AvailableNow reads on after a restart's replay only with Spark's wrapper
    # (without it: Trigger.Once, see the README); no effect on 4.2+, where the source has AvailableNow.
    spark = (SparkSession.builder.remote("local[2]").config("spark.ui.enabled", "false")
             .config(AVAILABLE_NOW_WRAPPER, "true").getOrCreate())
    # The Connect client retries a dead server for minutes; once the server's JVM is gone, end as a
    # client whose driver crashed would.
    threading.Thread(target=_exit_when_the_server_dies, daemon=True).start()
    if fail_at:
        spark.dataSource.register(FaultInjectingDataSource)
    try:
        def kafka_eos_read(topics: str, stream: bool = False):  # type: ignore[no-untyped-def]
            reader = (spark.readStream if stream else spark.read).format("kafka_eos")
            return reader.option("kafka.bootstrap.servers", bootstrap).option("subscribe", topics).option("startingOffsets", "earliest").load()

        batch = kafka_eos_read(source)
        read_count = batch.count()

        def batch_write(mode: str) -> None:
            writer = batch.select("key", "value").write.format("kafka_eos")
            writer = writer.mode(mode) if mode != "default" else writer
            (writer.option("kafka.bootstrap.servers", bootstrap).option("topic", batch_sink)
             .option("transactional.id.prefix", f"{prefix}-batch").save())

        # Before the append: what each other save mode did (its error, or null if it wrote).
        refused_modes: dict[str, object] = {}
        for mode in ("overwrite", "default"):
            try:
                batch_write(mode)
                refused_modes[mode] = None
            except Exception as refusal:  # noqa: BLE001 - the error's text is the outcome reported
                refused_modes[mode] = str(refusal)
        batch_write("append")
        seen: dict[str, object] = {"session": type(spark).__module__, "batch_read": read_count, "refused_modes": refused_modes}
        print(json.dumps(seen), flush=True)  # before the stream, whose driver a test may kill
        query = (
            kafka_eos_read(source, stream=True).select("key", "value").writeStream.format(FAULTS_FORMAT if fail_at else "kafka_eos")
            .option("kafka.bootstrap.servers", bootstrap).option("topic", stream_sink)
            .option("transactional.id.prefix", f"{prefix}-stream").option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start()
        )
        query.awaitTermination(300)
        error = query.exception()
        return {**seen, "stream_error": None if error is None else str(error),
                "stream_batches": [p.batchId for p in query.recentProgress if p.numInputRows]}
    finally:
        spark.stop()


def _server_jvms() -> set[int]:
    """The Java processes this process started (the local Connect server)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == os.getpid() and b"java" in (stat.parent / "cmdline").read_bytes():
                found.add(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _running(pid: int) -> bool:
    """True while ``pid`` exists and has not exited (a killed child stays a zombie until reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _exit_when_the_server_dies() -> None:
    servers = _server_jvms()
    while servers:
        time.sleep(0.5)
        if not any(_running(pid) for pid in servers):
            print("the Connect server died", file=sys.stderr, flush=True)
            os._exit(3)


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:8])), flush=True)
