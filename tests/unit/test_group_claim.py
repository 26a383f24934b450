"""The group's claim on the fakes: what it asks of the transaction coordinator, and how a refusal reads."""

from __future__ import annotations

from typing import Any

import pytest

from spark_kafka_eos._internal.txn.session import TxnFatalError, TxnFencedError
from spark_kafka_eos._internal.write.group_claim import GroupClaim, GroupClaimLost, claim_transactional_id
from spark_kafka_eos.errors import KafkaEosAuthorizationError
from tests.unit.fakes import options


class ClaimSession:
    """InitProducerId as the broker answers it: a bump, or PRODUCER_FENCED for an expected epoch that moved on."""

    def __init__(self, refuse: str | None = None) -> None:
        self.epoch, self.refuse = -1, refuse

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int]:
        if self.refuse:
            raise TxnFatalError(f"InitProducerId failed with {self.refuse}", transactional_id, "InitProducerId", self.refuse)
        if producer_id >= 0 and producer_epoch != self.epoch:
            raise TxnFencedError("PRODUCER_FENCED", transactional_id, "InitProducerId", "PRODUCER_FENCED")
        self.epoch += 1
        return 7, self.epoch


def _take(session: Any) -> GroupClaim:
    return GroupClaim.take(session, options(consumerGroup="orders").connection, "orders")


def test_a_claim_nobody_took_since_is_held() -> None:
    session = ClaimSession()
    _take(session).hold()


def test_a_claim_another_writer_took_meanwhile_is_lost() -> None:
    session = ClaimSession()
    first = _take(session)
    _take(session)
    with pytest.raises(GroupClaimLost, match="another writer decided on consumerGroup 'orders'"):
        first.hold()


def test_a_claim_the_principal_may_not_take_names_the_acl_to_grant() -> None:
    with pytest.raises(KafkaEosAuthorizationError) as refused:
        _take(ClaimSession(refuse="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"))
    message = str(refused.value)
    assert claim_transactional_id("orders") == "orders.kafka-eos-claim"
    assert "--transactional-id orders.kafka-eos-claim" in message and "--operation Write --operation Describe" in message
    assert "Nothing was committed; a re-run is safe" in message
