"""The consumer group whose offsets the sink commits in each decision (option ``consumerGroup``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_kafka_eos._internal.cluster import cached_session
from spark_kafka_eos._internal.config.librdkafka import for_librdkafka
from spark_kafka_eos._internal.config.writer import WriterOptions
from spark_kafka_eos._internal.retry import REQUEST_TIMEOUT_S
from spark_kafka_eos._internal.write.commit_outcomes import Ending
from spark_kafka_eos.errors import KafkaEosOptionError


def check_group_has_no_members(options: WriterOptions) -> None:
    """Refuse a group that consumers use: the sink would overwrite that application's offsets."""
    group = options.consumer_group
    if group is None:
        return
    state, members = _describe(options, group)
    if members:
        raise KafkaEosOptionError(
            "consumerGroup", f"is '{group}', a group with {members} active member(s) (state {state}): "
            "the sink would overwrite the offsets of another application.",
            "name a group of its own for the sink (e.g. '<query>-sink'), or stop that group's consumers.",
        )


def check_group_position(options: WriterOptions, starts: Mapping[tuple[str, int], int],
                         ends: Mapping[tuple[str, int], int],
                         remembered: Mapping[tuple[str, int], int] | None = None,
                         remembered_elsewhere: Callable[[], Mapping[tuple[str, int], int]] | None = None,
                         ) -> list[KafkaTopicPartition]:
    """Compare-and-set, the compare half: raise unless the group stands at or before where this epoch
    started reading (``starts``: the first source offset it consumed per partition) and committing
    ``ends`` would not move it backwards. ``remembered``: where the prefix last committed the group, which
    counts where the group has no offset (expired, or deleted); so does ``remembered_elsewhere()`` (where other prefixes
    last committed it, which may be past where this prefix did), asked only when the group lacks an offset.
    Returns the group's committed offsets, with their metadata."""
    group = options.consumer_group
    if group is None or not ends:
        return []
    # A read_committed consumer asks for stable offsets (it waits out a pending transactional commit); why not
    # the admin API: see cluster.group_offset_reader.
    reader = Consumer(for_librdkafka({**options.connection.client_config(), "group.id": group, "isolation.level": "read_committed",
                       "enable.auto.commit": False}))
    try:
        found = reader.committed([KafkaTopicPartition(t, p) for t, p in sorted(ends)], timeout=REQUEST_TIMEOUT_S)
    finally:
        reader.close()
    committed = {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}
    known = dict(remembered or {})
    if remembered_elsewhere is not None and any(tp not in committed for tp in starts):
        for tp, offset in remembered_elsewhere().items():
            known[tp] = max(offset, known.get(tp, offset))
    _refuse_forgotten(group, starts, committed, known)
    behind = sorted((tp, o, committed[tp]) for tp, o in ends.items() if tp in committed and o < committed[tp])
    if behind:
        where = ", ".join(f"{t}-{p}: {o} < {c}" for (t, p), o, c in behind[:5])
        raise Ending.RUN_REFUSED.error(
            f"The epoch was aborted (nothing of it is visible): it would move consumerGroup '{group}' backwards ({where}; "
            "consumed by this epoch < committed). The query started over from earlier offsets (a new checkpoint?) with "
            "the group of another run. Fix: give this query its own consumerGroup, or, if it is meant to start over, "
            f"reset the group first: kafka-consumer-groups --group {group} --reset-offsets --to-earliest --all-topics --execute."
        )
    overlap = sorted((tp, s, committed[tp]) for tp, s in starts.items() if tp in committed and s < committed[tp])
    if overlap:
        where = ", ".join(f"{t}-{p}: from {s}, the group at {c}" for (t, p), s, c in overlap[:5])
        raise Ending.RUN_REFUSED.error(
            f"The epoch was aborted (nothing of it is visible): consumerGroup '{group}' already stands past records this "
            f"epoch consumed ({where}): another writer committed that range first (two jobs that started from the group "
            "at once, or two queries or prefixes on one group). Committing would write those records twice. Fix: run one "
            "writer per consumerGroup at a time, and re-run this job with startingOffsets=group."
        )
    return list(found)


def _refuse_forgotten(group: str, starts: Mapping[tuple[str, int], int], committed: Mapping[tuple[str, int], int],
                      remembered: Mapping[tuple[str, int], int]) -> None:
    """A partition the prefix committed to the group, where the group now has no offset, read from before
    that offset: the job resumed from a group Kafka forgot (a reader with ``startingOffsets=group`` falls
    back to earliest there), and would write records again that an earlier decision wrote."""
    forgotten = sorted((tp, s, remembered[tp]) for tp, s in starts.items()
                       if tp not in committed and tp in remembered and s < remembered[tp])
    if not forgotten:
        return
    where = ", ".join(f"{t}-{p}: from {s}, committed to {r}" for (t, p), s, r in forgotten[:5])
    resume: dict[str, dict[str, int]] = {}
    for (t, p), r in sorted(remembered.items()):
        resume.setdefault(t, {})[str(p)] = committed.get((t, p), r)
    raise Ending.RUN_REFUSED.error(
        f"The epoch was aborted (nothing of it is visible): consumerGroup '{group}' has no committed offset for "
        f"partitions this transactional.id.prefix committed it to before ({where}). (A partition this prefix never "
        "committed counts where another prefix of its decision log did.) Kafka expired them "
        "(a group without members keeps its offsets offsets.retention.minutes, 7 days by default, after its last "
        "commit) or the group was deleted, so the job read again what an earlier decision wrote. It is safe to "
        f"re-run. Fix: re-run it with .option('startingOffsets', '{json.dumps(resume, separators=(',', ':'))}') "
        "(where the group stood, adding any other partition the job reads, -2 for earliest; its offsets are committed "
        "again with the output), or restore the group's offsets to these with kafka-consumer-groups --reset-offsets "
        "and re-run from the group; and raise the broker's offsets.retention.minutes above the time between runs."
    )


def _describe(options: WriterOptions, group: str) -> tuple[str, int]:
    """The group's (state, member count), over kafka-python: librdkafka's admin DescribeGroups, timed out while
    the group coordinator is down, can abort the process later (librdkafka issues #4605, #3663)."""
    return cached_session(options.connection).describe_group(group)
