"""KIP-890's transaction verification, as Kafka's AddPartitionsToTxnManager does it.

Before a leader appends the transactional batch that would open a producer's transaction on a partition,
the producer's transaction coordinator confirms the partition is in that transaction (AddPartitionsToTxn
v4 with verify_only, or in-process when this broker is the coordinator). Without it a late or stray
transactional batch (a producer that produced after its transaction was aborted by the timeout, a client
that never called AddPartitionsToTxn) opens a transaction no coordinator will ever end: the partition's
last stable offset stops, and read_committed consumers with it ("hanging transactions").
"""

from __future__ import annotations

import logging
from typing import Protocol

from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.versions import ApiKey
from brook.replication.replica import LeaderAndIsr
from brook.transactions import TXN_STATE_TOPIC, TransactionCoordinator

from .peer_pool import PeerHost, PeerPool

log = logging.getLogger(__name__)

Partition = tuple[str, int]
_VERSION = 4


class VerifierHost(PeerHost, Protocol):
    @property
    def transactions(self) -> TransactionCoordinator: ...
    def partition_state(self, topic: str, index: int) -> LeaderAndIsr: ...


class TxnVerifier:
    def __init__(self, broker: VerifierHost) -> None:
        self._broker = broker
        self._pool = PeerPool(broker, "txn-verify")

    async def verify(
        self, transactional_id: str, producer_id: int, epoch: int, parts: list[Partition]
    ) -> dict[Partition, ErrorCode]:
        """The coordinator's answer for each partition: NONE when it is in the transaction."""
        coordinator = self._broker.transactions
        try:
            leader = self._broker.partition_state(
                TXN_STATE_TOPIC, coordinator.partition_for(transactional_id)
            ).leader
        except KafkaError:  # no __transaction_state yet: no transaction can be open
            return dict.fromkeys(parts, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if leader == self._broker.node_id:
            try:
                return coordinator.verify(transactional_id, producer_id, epoch, parts)
            except KafkaError as e:
                return dict.fromkeys(parts, e.code)
        if leader < 0:
            return dict.fromkeys(parts, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return await self._ask(leader, transactional_id, producer_id, epoch, parts)

    async def _ask(
        self, node: int, transactional_id: str, producer_id: int, epoch: int, parts: list[Partition]
    ) -> dict[Partition, ErrorCode]:
        by_topic: dict[str, list[int]] = {}
        for t, i in parts:
            by_topic.setdefault(t, []).append(i)
        txn = {
            "transactional_id": transactional_id,
            "producer_id": producer_id,
            "producer_epoch": epoch,
            "verify_only": True,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        body = messages.encode_request(ApiKey.ADD_PARTITIONS_TO_TXN, _VERSION, {"transactions": [txn]})
        try:
            raw = await self._pool.request(node, ApiKey.ADD_PARTITIONS_TO_TXN, _VERSION, body)
            resp = messages.decode_response(ApiKey.ADD_PARTITIONS_TO_TXN, _VERSION, raw)
        except (ConnectionError, TimeoutError, OSError, KafkaError) as e:
            log.debug("verifying %s with broker %d failed: %s", transactional_id, node, e)
            return dict.fromkeys(parts, ErrorCode.NETWORK_EXCEPTION)
        if resp.error_code:  # e.g. CLUSTER_AUTHORIZATION_FAILED: Kafka answers INVALID_TXN_STATE
            code = ErrorCode(resp.error_code)
            return dict.fromkeys(
                parts, ErrorCode.INVALID_TXN_STATE if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else code
            )
        out = dict.fromkeys(parts, ErrorCode.UNKNOWN_SERVER_ERROR)
        for result in resp.results_by_transaction:
            for t in result.topic_results:
                for p in t.results_by_partition:
                    out[(t.name, p.partition_index)] = ErrorCode(p.partition_error_code)
        return out

    def close(self) -> None:
        self._pool.close()


# Retriable verification errors older clients may not retry: Kafka answers NOT_ENOUGH_REPLICAS (retried,
# no metadata refresh) instead.
_RETRY = {
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
}


def produce_error(code: ErrorCode, produce_version: int) -> ErrorCode:
    """The Produce error for a failed verification (Kafka's AddPartitionsToTxnManager and
    ReplicaManager): TRANSACTION_ABORTABLE only to clients that know it (Produce v11+)."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == ErrorCode.TRANSACTION_ABORTABLE and produce_version <= 10:
        return ErrorCode.INVALID_TXN_STATE
    if code in _RETRY:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return code
