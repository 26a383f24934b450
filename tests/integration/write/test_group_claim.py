"""Two prefixes that commit one consumerGroup at the same moment, on a real broker: the second one's whole commit runs
between the first one's compare (its read of the group) and its decision. One of them is refused, never both passed."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pytest

from spark_kafka_eos._internal.cluster import cached_session
from spark_kafka_eos._internal.config.writer import WriterOptions, parse_writer_options
from spark_kafka_eos._internal.decision_log.records import EpochId, LogRecord
from spark_kafka_eos._internal.txn.protocol import TransactionClient
from spark_kafka_eos._internal.txn.session import TxnState
from spark_kafka_eos._internal.write.commit_message import TaskCommit
from spark_kafka_eos._internal.write.coordinator import TwoPhaseCommitCoordinator
from spark_kafka_eos._internal.write.group_claim import claim_transactional_id
from spark_kafka_eos._internal.write.hooks import BEFORE_DECISION, WriterHooks
from spark_kafka_eos._internal.write.task_producer import TaskIdentity, write_task
from spark_kafka_eos.errors import KafkaEosRunRefusedError
from tests.harness.coordinator import TIMEOUT_MS, committed_values
from tests.harness.kafka import KafkaTestCluster, Sent
from tests.harness.pipeline import open_transactions

pytestmark = pytest.mark.kafka


@dataclass
class AnotherPrefixDecidesFirst(WriterHooks):
    """Runs ``commit`` (another prefix's whole commit) once, right before this commit's decision: after its compare."""

    commit: Callable[[], None]
    fired: int = 0

    def at(self, point: str, session: TransactionClient, decision: LogRecord) -> None:
        if point == BEFORE_DECISION and not self.fired:
            self.fired += 1
            self.commit()


class _TwoPrefixes:
    """Prefixes p and q of one sink and one consumerGroup, copying a two-partition source topic."""

    def __init__(self, kafka: KafkaTestCluster) -> None:
        self.source, self.sink = kafka.create_topic(2, "src"), kafka.create_topic(1, "sink")
        self.sent = {p: kafka.produce_plain(self.source, [Sent(p, None, f"in-{p}-{i}".encode()) for i in range(5)])
                     for p in (0, 1)}
        tag = uuid.uuid4().hex[:8]
        self.group, self.kafka, self.tag = f"shared-{tag}", kafka, tag

    def options(self, prefix: str) -> WriterOptions:
        return parse_writer_options({"kafka.bootstrap.servers": self.kafka.bootstrap_servers, "topic": self.sink,
                                     "consumerGroup": self.group, "transactional.id.prefix": f"{prefix}-{self.tag}",
                                     "decisionlogtopic": f"_decisions-{self.tag}"}, streaming=True)

    def copy(self, options: WriterOptions, epoch: EpochId, partitions: tuple[int, ...]) -> TaskCommit:
        """A task that copies ``partitions`` of the source, with the source columns."""
        read = [(p, i, s) for p in partitions for i, s in enumerate(self.sent[p])]
        rows = pa.record_batch([pa.array([s.value for _, _, s in read], pa.binary()),
                                pa.array([self.source] * len(read), pa.string()),
                                pa.array([p for p, _, _ in read], pa.int32()), pa.array([i for _, i, _ in read], pa.int64())],
                               names=["value", "source_topic", "source_partition", "source_offset"])
        return write_task(options, epoch, [rows], task=TaskIdentity(0, 0, 0), transaction_timeout_ms=TIMEOUT_MS)

    def values(self, partitions: tuple[int, ...]) -> list[bytes]:
        return sorted(s.value or b"" for p in partitions for s in self.sent[p])


def test_two_prefixes_deciding_one_group_at_once_never_both_pass(kafka: KafkaTestCluster) -> None:
    """p read the group (nothing committed) and is about to decide; q then copies the same records and decides. p's
    decision must not commit: its claim on the group is lost, it compares again and finds q's offsets."""
    two = _TwoPrefixes(kafka)
    p, q = two.options("p"), two.options("q")
    epoch_p, epoch_q = EpochId.stream("query-p", 0), EpochId.stream("query-q", 0)
    task_q = two.copy(q, epoch_q, (0, 1))
    q_decides = AnotherPrefixDecidesFirst(lambda: TwoPhaseCommitCoordinator(q, TIMEOUT_MS).commit(epoch_q, [task_q]))

    with pytest.raises(KafkaEosRunRefusedError, match=f"consumerGroup '{two.group}' already stands past records"):
        TwoPhaseCommitCoordinator(p, TIMEOUT_MS, hooks=q_decides).commit(epoch_p, [two.copy(p, epoch_p, (0, 1))])
    assert q_decides.fired == 1, "the fault fired: q decided between p's compare and p's decision"
    assert committed_values(kafka, two.sink) == two.values((0, 1))
    assert kafka.group_offsets(two.group, two.source) == {0: 5, 1: 5}
    assert open_transactions(kafka, p.prefix) == []


def test_a_prefix_that_lost_the_claim_to_another_on_other_partitions_compares_again_and_commits(kafka: KafkaTestCluster) -> None:
    """Two prefixes that share a group but read other partitions: the one whose claim was taken meanwhile is not
    refused for it; it compares again, and both commit."""
    two = _TwoPrefixes(kafka)
    p, q = two.options("p"), two.options("q")
    epoch_p, epoch_q = EpochId.stream("query-p", 0), EpochId.stream("query-q", 0)
    task_q = two.copy(q, epoch_q, (1,))
    q_decides = AnotherPrefixDecidesFirst(lambda: TwoPhaseCommitCoordinator(q, TIMEOUT_MS).commit(epoch_q, [task_q]))

    TwoPhaseCommitCoordinator(p, TIMEOUT_MS, hooks=q_decides).commit(epoch_p, [two.copy(p, epoch_p, (0,))])
    assert q_decides.fired == 1
    assert committed_values(kafka, two.sink) == two.values((0, 1))
    assert kafka.group_offsets(two.group, two.source) == {0: 5, 1: 5}
    claim = claim_transactional_id(two.group)
    assert cached_session(p.connection).describe([claim])[claim].state == TxnState.EMPTY, "the claim id never holds a transaction"
