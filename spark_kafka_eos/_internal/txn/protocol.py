"""What the write path and the operator tools ask of transaction coordinators: :class:`TransactionClient`.

:class:`~spark_kafka_eos._internal.txn.session.TransactionSession` sends these requests to Kafka; the tests' models of Kafka
answer them themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from spark_kafka_eos._internal.txn.session import PreparedTxnState, TxnDescription, TxnListing


class TransactionClient(Protocol):
    """Transactions of other producers, described, listed, fenced and ended by their coordinators."""

    def describe(self, transactional_ids: Sequence[str], /) -> dict[str, TxnDescription]:
        """DescribeTransactions of each id."""

    def list_transactions(self, state_filters: Iterable[str] = (), *, id_prefix: str | None = None) -> list[TxnListing]:
        """ListTransactions of every broker (``id_prefix`` narrows it where a broker can; filter the answer still)."""

    def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int, producer_id: int = -1,
                         producer_epoch: int = -1, /) -> tuple[int, int]:
        """InitProducerId: (producer id, producer epoch); fences the id's owner and aborts its open transaction."""

    def commit(self, state: PreparedTxnState, /) -> None:
        """EndTxn(commit) of exactly that producer id and epoch."""

    def abort(self, state: PreparedTxnState, /) -> None:
        """EndTxn(abort) of exactly that producer id and epoch."""

    def wait_settled(self, transactional_ids: Sequence[str], /) -> dict[str, TxnDescription]:
        """Describe the ids until none is in a Prepare* state."""
