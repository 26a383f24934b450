"""Run inside a fresh virtualenv that has only the built wheel installed (no repository on the path):
a batch read and a batch write with ``format("kafka_eos")``, with no registration call.

    python wheel_job.py BOOTSTRAP SOURCE SINK [ENGINE]

ENGINE (``auto`` by default) is the ``readEngine`` and ``writeEngine`` of both; ``native`` fails without the compiled
paths' wheel.

Prints one JSON line.
"""

import json
import os
import sys


def main(bootstrap: str, source: str, sink: str, engine: str = "auto") -> dict:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import spark_kafka_eos

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        df = (spark.read.format("kafka_eos").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
              .option("readEngine", engine).load())
        read = df.count()
        (df.select("key", "value").write.format("kafka_eos").mode("append").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", sink).option("transactional.id.prefix", f"wheel-{sink}").option("writeEngine", engine).save())
        try:
            import spark_kafka_eos_native
            native = spark_kafka_eos_native.__file__
        except ImportError:
            native = None
        return {"package": spark_kafka_eos.__file__, "version": spark_kafka_eos.__version__, "read": read, "native": native}
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:5])), flush=True)
