"""One decision at a time on a consumer group (option ``consumerGroup``), across prefixes.

A decision compares the group's offsets with where its epoch started, then commits its own in the decision's
transaction. Kafka has no conditional offset commit, so two prefixes deciding at the same moment would both pass the
compare. A claim serialises them with a transactional id of the group's own, ``<group>.kafka-eos-claim``, that no
transaction ever uses: a decision takes the claim (InitProducerId, which bumps the id's epoch) before it reads the
group, and, once its offsets are written in the decision's transaction and before that transaction commits, proves
that nobody took it since (InitProducerId with the producer id and epoch it got: KIP-360 refuses it, PRODUCER_FENCED,
if the epoch moved; a retry after a lost answer is accepted). So of two decisions, the one that takes the claim
second reads the group after the first one's offsets were written (a read_committed read waits for them), and the
first one, whose claim is then lost, commits nothing and compares again.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_kafka_eos._internal.config.connection import KafkaConnection
from spark_kafka_eos._internal.decision_log.coordinator_id import COORDINATOR_TRANSACTION_TIMEOUT_MS
from spark_kafka_eos._internal.txn.protocol import TransactionClient
from spark_kafka_eos._internal.txn.session import TxnFencedError, TxnSessionError
from spark_kafka_eos.errors import KafkaEosAuthorizationError

CLAIM_SUFFIX = "kafka-eos-claim"
CLAIM_ATTEMPTS = 3
"""Claims a decision may lose before it is refused: each loss means another writer decided on the group meanwhile."""


def claim_transactional_id(group: str) -> str:
    return f"{group}.{CLAIM_SUFFIX}"


class GroupClaimLost(Exception):
    """Another writer took the group's claim after this decision read the group: its compare is stale."""


@dataclass(frozen=True)
class GroupClaim:
    """The claim a decision took on ``group``: the claim id's producer id and epoch right after it bumped them."""

    session: TransactionClient
    group: str
    producer_id: int
    producer_epoch: int

    @classmethod
    def take(cls, session: TransactionClient, connection: KafkaConnection, group: str) -> GroupClaim:
        """Take the claim: call it before reading the group's offsets."""
        try:
            producer_id, epoch = session.init_producer_id(claim_transactional_id(group), COORDINATOR_TRANSACTION_TIMEOUT_MS)
        except TxnSessionError as err:
            if err.error == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED":
                raise claim_refused(connection, group) from None
            raise
        return cls(session, group, producer_id, epoch)

    def hold(self) -> None:
        """Raise :class:`GroupClaimLost` unless the claim is still this decision's: call it after the offsets are
        written in the decision's transaction, before its commit."""
        try:
            self.session.init_producer_id(claim_transactional_id(self.group), COORDINATOR_TRANSACTION_TIMEOUT_MS,
                                          self.producer_id, self.producer_epoch)
        except TxnFencedError as err:
            raise GroupClaimLost(f"another writer decided on consumerGroup '{self.group}' meanwhile ({err.error})") from err


def claim_refused(connection: KafkaConnection, group: str) -> KafkaEosAuthorizationError:
    username = connection.client_config().get("sasl.username")
    principal = f"User:{username}" if username else "<the principal of these kafka.* credentials>"
    return KafkaEosAuthorizationError(
        f"Kafka at {connection.bootstrap_servers} refused {principal} the TransactionalId '{claim_transactional_id(group)}' "
        f"(TRANSACTIONAL_ID_AUTHORIZATION_FAILED). With consumerGroup '{group}', every decision first takes that id, "
        "shared by all the prefixes that commit the group, so that two of them never both pass its compare-and-set. "
        "Nothing was committed; a re-run is safe once the ACL is granted. Fix: kafka-acls --bootstrap-server "
        f"{connection.bootstrap_servers} --add --allow-principal {principal} --operation Write --operation Describe "
        f"--transactional-id {claim_transactional_id(group)}"
    )
