"""Transaction markers: written here for the partitions this broker leads, sent as WriteTxnMarkers to
the leaders of the others (over the inter-broker listener, one connection per broker, one request at a
time as Kafka's TransactionMarkerChannelManager does per destination)."""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from brook.groups import GroupCoordinator
from brook.groups.coordinator import OFFSETS_TOPIC
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.versions import ApiKey
from brook.replication.replica import LeaderAndIsr
from brook.settings.broker import BrokerSettings

from .peer_pool import PeerPool
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

Partition = tuple[str, int]


class MarkerHost(Protocol):
    """What writing markers needs of the broker (brook.broker.broker.Broker): the partitions it leads, where
    the others' leaders are, and the group coordinator that applies committed offsets."""

    @property
    def node_id(self) -> int: ...
    @property
    def settings(self) -> BrokerSettings: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def groups(self) -> GroupCoordinator: ...
    def partition_state(self, topic: str, index: int) -> LeaderAndIsr: ...
    def endpoint(self, node_id: int, listener: str | None = None) -> tuple[str, int] | None: ...


_VERSION = 1
_MARKER_TIMEOUT_S = 30.0


async def write_marker(
    broker: MarkerHost,
    topic: str,
    index: int,
    producer_id: int,
    epoch: int,
    commit: bool,
    coordinator_epoch: int,
) -> None:
    """Append one marker as the partition's leader and wait for the in-sync replicas (acks=all)."""
    p = broker.replicas.partition(topic, index)
    offset = p.append_marker(producer_id, epoch, commit, coordinator_epoch)
    await p.wait_committed(offset, p.leader_epoch, _MARKER_TIMEOUT_S)
    if topic == OFFSETS_TOPIC:
        broker.groups.complete_txn(index, producer_id, commit)


class TxnMarkerWriter:
    def __init__(self, broker: MarkerHost) -> None:
        self._broker = broker
        self._pool = PeerPool(broker, "txn-markers")

    async def write_markers(
        self, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int, partitions: list[Partition]
    ) -> dict[Partition, ErrorCode]:
        by_leader: dict[int, list[Partition]] = {}
        results: dict[Partition, ErrorCode] = {}
        for topic, index in partitions:
            try:
                leader = self._broker.partition_state(topic, index).leader
            except KafkaError as e:
                results[(topic, index)] = e.code
                continue
            by_leader.setdefault(leader, []).append((topic, index))
        sends = [
            self._send(leader, producer_id, epoch, commit, coordinator_epoch, parts)
            for leader, parts in by_leader.items()
        ]
        for answer in await asyncio.gather(*sends):
            results.update(answer)
        return results

    async def _send(
        self, leader: int, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int,
        parts: list[Partition],
    ) -> dict[Partition, ErrorCode]:  # fmt: skip
        if leader == self._broker.node_id:
            return await write_local(self._broker, producer_id, epoch, commit, coordinator_epoch, parts)
        if leader < 0:
            return dict.fromkeys(parts, ErrorCode.LEADER_NOT_AVAILABLE)
        by_topic: dict[str, list[int]] = {}
        for t, i in parts:
            by_topic.setdefault(t, []).append(i)
        body = messages.encode_request(
            ApiKey.WRITE_TXN_MARKERS,
            _VERSION,
            {
                "markers": [
                    {
                        "producer_id": producer_id,
                        "producer_epoch": epoch,
                        "transaction_result": commit,
                        "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
                        "coordinator_epoch": coordinator_epoch,
                    }
                ]
            },
        )
        try:
            raw = await self._pool.request(leader, ApiKey.WRITE_TXN_MARKERS, _VERSION, body)
            resp = messages.decode_response(ApiKey.WRITE_TXN_MARKERS, _VERSION, raw)
        except (ConnectionError, TimeoutError, OSError, KafkaError) as e:
            log.debug("WriteTxnMarkers to broker %d failed: %s", leader, e)
            return dict.fromkeys(parts, ErrorCode.NETWORK_EXCEPTION)
        out: dict[Partition, ErrorCode] = dict.fromkeys(parts, ErrorCode.UNKNOWN_SERVER_ERROR)
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = ErrorCode(p.error_code)
        return out

    def close(self) -> None:
        self._pool.close()


async def write_local(
    broker: MarkerHost,
    producer_id: int,
    epoch: int,
    commit: bool,
    coordinator_epoch: int,
    parts: list[Partition],
) -> dict[Partition, ErrorCode]:
    """Markers to partitions this broker leads, all at once; an error code per partition."""

    async def one(topic: str, index: int) -> ErrorCode:
        try:
            await write_marker(broker, topic, index, producer_id, epoch, commit, coordinator_epoch)
        except KafkaError as e:
            return e.code
        return ErrorCode.NONE

    codes = await asyncio.gather(*(one(t, i) for t, i in parts))
    return dict(zip(parts, codes, strict=True))
