"""A Spark driver of its own that reads and writes with the credentials it is given, logging everything it
can (the package's and kafka-python's loggers at DEBUG, librdkafka's debug lines, plans and option reprs),
so that a test can search all of its output for the password.

    python -m tests.harness.secret_job '<options JSON>' <topic> <sink> <prefix>
"""

from __future__ import annotations

import json
import logging
import sys

from tests.harness.notebook_runner import local_spark


def main(argv: list[str]) -> int:
    options, topic, sink, prefix = json.loads(argv[0]), argv[1], argv[2], argv[3]
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    # py4j's DEBUG lines echo every call this script makes to the JVM, arguments included: the user's own
    # option() calls, not something the package or Spark logs. Everything else stays at DEBUG.
    logging.getLogger("py4j").setLevel(logging.INFO)
    spark = local_spark("secret-job")
    spark.sparkContext.setLogLevel("DEBUG")
    failures = 0
    try:
        from spark_kafka_eos._internal.config.reader import parse_reader_options

        print(repr(parse_reader_options({k.lower(): v for k, v in {**options, "subscribe": topic}.items()}, streaming=False)))
        df = spark.read.format("kafka_eos").options(**options).option("subscribe", topic).load()
        df.explain(True)
        print("read", df.count())
        (df.selectExpr("value").write.format("kafka_eos").mode("append").options(**options)
         .option("topic", sink).option("transactional.id.prefix", prefix).save())
        print("written")
    except Exception as error:  # noqa: BLE001 - the error's text is part of what is searched
        failures += 1
        print(f"failed: {type(error).__name__}: {error}", file=sys.stderr)
    finally:
        spark.stop()
    return failures


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
