"""A stream's progress, committed to a consumer group for lag tools (option ``progressGroup``).

Not transactional and not read back: the checkpoint stays the only source of truth for where the
query stands. After a crash the group can be one micro-batch behind, or ahead of a batch that
Spark then replays.
"""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_kafka_eos._internal.config.librdkafka import for_librdkafka
from spark_kafka_eos._internal.config.reader import ReaderOptions
from spark_kafka_eos._internal.read.planner import Offsets

log = logging.getLogger(__name__)


def commit_progress(options: ReaderOptions, offsets: Offsets) -> None:
    """Commit ``offsets`` (the next offset to read, per partition) to ``options.progress_group``.

    A failure is logged, not raised: a lag dashboard must not stop the query."""
    assert options.progress_group is not None
    committer = Consumer(for_librdkafka({**options.connection.client_config(), "group.id": options.progress_group, "enable.auto.commit": False}))
    try:
        committer.commit(
            offsets=[KafkaTopicPartition(topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())],
            asynchronous=False,
        )
    except KafkaException as err:
        log.warning("kafka_eos could not commit the stream's progress to group %r: %s", options.progress_group, err.args[0].str())
    finally:
        committer.close()
