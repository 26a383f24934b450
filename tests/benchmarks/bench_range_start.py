"""What a small range read costs on a new consumer and on one kept from the last read (read/idle_consumers.py).

    PYTHONPATH=. .venv/bin/python -m tests.benchmarks.bench_range_start

150-record ranges of a 2-partition topic, read one after another in this process through ``read_offset_range``,
after an idle pause (20 ms, 200 ms) as between a micro-batch's phases; "new" closes the kept consumers before each
read. Alternating rounds, both read engines, medians in ms.
"""

from __future__ import annotations

import statistics
import time
import uuid
from contextlib import ExitStack

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_kafka_eos._internal.config.reader import parse_reader_options
from spark_kafka_eos._internal.read.idle_consumers import IDLE_CONSUMERS
from spark_kafka_eos._internal.read.partition_reader import read_offset_range
from spark_kafka_eos._internal.read.planner import OffsetRange
from tests.benchmarks.common import bootstrap_servers, check_count

RANGE = 150
READS = 25
WARM_UP = 3


def main() -> None:
    with ExitStack() as stack:
        bootstrap = bootstrap_servers(stack)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = f"range-start-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i in range(2 * RANGE * READS * 4):
            producer.produce(topic, b"v" * 100, str(i).encode(), i % 2)
        producer.flush(60)
        print(f"{'engine':<8} {'idle ms':>8} {'new consumer':>13} {'kept consumer':>14}")
        for engine in ("native", "python"):
            options = parse_reader_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "readEngine": engine},
                                           streaming=False)
            for idle_s in (0.02, 0.2):
                times: dict[str, list[float]] = {"new": [], "kept": []}
                start = 0
                for mode in ("new", "kept", "new", "kept"):
                    for i in range(READS):
                        if mode == "new":
                            IDLE_CONSUMERS.close_all()
                        time.sleep(idle_s)
                        began = time.perf_counter()
                        batches = read_offset_range(options, OffsetRange(topic, i % 2, start, start + RANGE))
                        check_count(f"{engine}, {mode}", sum(b.num_rows for b in batches), RANGE)
                        if i >= WARM_UP:
                            times[mode].append((time.perf_counter() - began) * 1000)
                        start += RANGE * (i % 2)
                print(f"{engine:<8} {idle_s * 1000:>8.0f} {statistics.median(times['new']):>13.1f} "
                      f"{statistics.median(times['kept']):>14.1f}", flush=True)
                start = 0
        IDLE_CONSUMERS.close_all()


if __name__ == "__main__":
    main()
