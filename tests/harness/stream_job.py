"""A streaming read in a Spark driver of its own, so that a test can read everything the driver and its
Python workers wrote to stderr (the stream reader runs in a Python process the driver's JVM starts, whose
log lines reach the JVM's stderr, not the test session's logging).

    python -m tests.harness.stream_job '<options JSON>' CHECKPOINT

Reads ``format("kafka_eos")`` with the options (``startingOffsets`` earliest unless given) under
``Trigger.AvailableNow`` into a memory sink, and prints one JSON line: the values read, sorted, and the
query's error (null when it succeeded).
"""

from __future__ import annotations

import json
import sys

from tests.harness.notebook_runner import local_spark


def main(options: dict[str, str], checkpoint: str) -> dict[str, object]:
    spark = local_spark("stream-job")
    try:
        reader = spark.readStream.format("kafka_eos").option("startingOffsets", "earliest")
        query = (
            reader.options(**options).load().writeStream.format("memory").queryName("stream_job")
            .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
        )
        query.awaitTermination(300)
        error = query.exception()
        values = sorted(bytes(r.value).decode() for r in spark.sql("select value from stream_job").collect())
        return {"values": values, "error": None if error is None else str(error)}
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]), sys.argv[2])), flush=True)
