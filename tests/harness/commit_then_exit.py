"""Run as a process: a stream writer's commit of micro-batch 0 (two tasks prepared here), then ``os._exit(0)`` at
once, as pyspark ends a Python worker: no ``atexit`` runs and no thread of the process lives on.

    python -m tests.harness.commit_then_exit <bootstrap servers> <topic> <prefix> <decision log topic>
"""

from __future__ import annotations

import os
import sys

from pyspark.sql.types import BinaryType, StructField, StructType

from spark_kafka_eos._internal.config.writer import parse_writer_options
from spark_kafka_eos._internal.write.open_writer import open_stream_writer
from tests.harness.coordinator import prepare


def main(bootstrap_servers: str, topic: str, prefix: str, decision_log_topic: str) -> None:
    raw = {"kafka.bootstrap.servers": bootstrap_servers, "topic": topic, "transactional.id.prefix": prefix,
           "decisionlogtopic": decision_log_topic}
    writer = open_stream_writer(raw, StructType([StructField("value", BinaryType())]))
    options = parse_writer_options(raw, streaming=True)
    writer.commit([prepare(options, 0, ["a"]), prepare(options, 1, ["b"])], 0)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(*sys.argv[1:5])
