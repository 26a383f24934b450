"""The streaming-aggregation recipe of docs/writing.md ("Streaming aggregations (Update mode)"), in a driver of its
own so that a test can kill that driver between a micro-batch's write and Spark's commit log.

``groupBy("key").count()`` in Update mode over a ``kafka_eos`` stream; ``foreachBatch`` writes each micro-batch
with ``batch_df.write.format("kafka_eos")`` under a ``writeId`` made of the query id and the batch id.

    python -m tests.harness.aggregation_job '<arguments JSON>'

With ``crash_after_batch`` set, the driver is killed (its JVM SIGKILLed, then ``os._exit``) right after that
micro-batch's write returned, before Spark writes its commit log; the fault marker
``foreach_batch_written:kill-driver`` says it fired (detail: the query id and the batch id). Every foreachBatch call
that wrote is appended to ``calls`` (one JSON line: the query id and batch id), so a test sees which batch ids each
run handled.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from tests.harness.faults import mark_fired
from tests.harness.notebook_runner import local_spark

CRASH_POINT = "foreach_batch_written:kill-driver"
QUERY_ID_PROPERTY = "sql.streaming.queryId"


def run(spark: Any, bootstrap_servers: str, source: str, sink: str, prefix: str, checkpoint: str, calls: str,
        crash_after_batch: int | None = None, max_offsets_per_trigger: int = 10) -> None:
    """One AvailableNow run of the recipe; raises what the query failed with."""

    def write_counts(batch_df: Any, batch_id: int) -> None:
        # The query id: the same on every restart of one checkpoint, new for a new one.
        query_id = batch_df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        write_id = f"{query_id}-{batch_id}"
        (batch_df.write.format("kafka_eos")
         .option("kafka.bootstrap.servers", bootstrap_servers)
         .option("topic", sink)
         .option("transactional.id.prefix", prefix)
         .option("writeId", write_id)
         .mode("append")
         .save())
        with open(calls, "a") as log:
            log.write(json.dumps({"query": query_id, "batch": batch_id}) + "\n")
        if batch_id == crash_after_batch:
            mark_fired(CRASH_POINT, f"{query_id}-{batch_id}")
            jvm_pid = int(batch_df.sparkSession.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
            os.kill(jvm_pid, signal.SIGKILL)  # the driver's JVM: no commit log entry for this batch
            os._exit(1)

    counts = (spark.readStream.format("kafka_eos")
              .option("kafka.bootstrap.servers", bootstrap_servers)
              .option("subscribe", source)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
              .load()
              .groupBy("key").count()
              .selectExpr("key", "CAST(count AS STRING) AS value"))
    query = (counts.writeStream.outputMode("update")
             .foreachBatch(write_counts)
             .option("checkpointLocation", checkpoint)
             .trigger(availableNow=True)
             .start())
    query.awaitTermination(300)
    error = query.exception()
    if error is not None:
        raise error


def main(arguments: dict[str, Any]) -> None:
    spark = local_spark("aggregation-job", conf={"spark.sql.shuffle.partitions": "2"})
    try:
        run(spark, **arguments)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
