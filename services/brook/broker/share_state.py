"""Share groups' state store: the `__share_group_state` topic (brook.share.state_records' format) and
each group's share settings (group configs over the broker's defaults).

Brook's own equivalent of Kafka's share coordinator RPCs (WriteShareGroupState, ReadShareGroupState):
a share-partition's state lives in the state partition its key hashes to. The partition leader that
changes a share-partition writes its snapshot there with acks=all, appended here when this broker
leads that state partition, else sent as a Produce (acks=-1) to its leader over the inter-broker
listener (one request at a time per broker, brook.broker.peer_pool), one write at a time per state
partition so the writes of a key land in order. A
share-partition is loaded by reading its state partition from the replica this broker hosts (leader
or follower: with acks=all every acknowledged write is in every in-sync replica's log). A broker with
no replica of that state partition (more brokers than its replication factor) cannot read it and
starts the share-partition at share.auto.offset.reset, with a warning.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.group_records import build_batch, iter_records
from brook.protocol.versions import ApiKey
from brook.replication.replica import LeaderAndIsr
from brook.settings.broker import BrokerSettings
from brook.share.partition import ShareSettings
from brook.share.state_records import (
    ShareKey,
    ShareSnapshot,
    decode_value,
    encode_key,
    encode_value,
    key_hash,
)

from .internal_topics import InternalTopic
from .peer_pool import PeerPool

log = logging.getLogger(__name__)

__all__ = ["SHARE_STATE_TOPIC", "ShareStateHost", "ShareStateTopic", "share_settings", "share_timings"]

SHARE_STATE_TOPIC = "__share_group_state"
STATE_PARTITIONS = 50  # Kafka's share.coordinator.state.topic.num.partitions
STATE_REPLICATION = 3
_PRODUCE_VERSION = 9


class ShareStateHost(Protocol):
    """What the store needs of its broker (brook.broker.broker.Broker) to reach other brokers."""

    @property
    def node_id(self) -> int: ...
    @property
    def settings(self) -> BrokerSettings: ...
    def partition_state(self, topic: str, index: int) -> LeaderAndIsr: ...
    def endpoint(self, node_id: int, listener: str | None = None) -> tuple[str, int] | None: ...


class ShareStateTopic:
    def __init__(
        self, host: ShareStateHost, topic: InternalTopic, partitions: int = STATE_PARTITIONS
    ) -> None:
        self._host = host
        self._topic = topic
        self._partitions = partitions
        self._locks: dict[int, asyncio.Lock] = {}  # one write at a time per state partition
        # One request at a time per broker: saves of state partitions led by one broker share it.
        self._pool = PeerPool(host, "share-state")
        self._warned: set[str] = set()

    def _partition_of(self, key: ShareKey) -> int:
        return key_hash(key) % self._partitions

    def _warn(self, what: str, message: str, *args: object) -> None:
        if what not in self._warned:
            self._warned.add(what)
            log.warning(message, *args)

    async def _ensure(self) -> None:
        if not self._topic.topic_exists(self._topic.name):
            await self._topic.ensure_topic(self._partitions, STATE_REPLICATION)

    async def load(self, key: ShareKey) -> ShareSnapshot | None:
        await self._ensure()
        partition, raw_key = self._partition_of(key), encode_key(key)
        latest: bytes | None = None
        try:
            for chunk in self._topic.read_batches(partition):
                for _offset, k, v in iter_records(chunk):
                    if k == raw_key:
                        latest = v
        except KafkaError as e:
            self._warn(
                f"read-{partition}",
                "share: %s-%d is not readable here (%s); share-partitions of its keys start afresh",
                self._topic.name,
                partition,
                e.message,
            )
            return None
        return decode_value(latest) if latest is not None else None

    async def save(self, key: ShareKey, snapshot: Callable[[], ShareSnapshot | None]) -> None:
        await self._ensure()
        partition = self._partition_of(key)
        lock = self._locks.setdefault(partition, asyncio.Lock())
        async with lock:
            snap = snapshot()  # taken now: no other write of this key is on its way
            value = encode_value(snap) if snap is not None else None
            batch = build_batch([(encode_key(key), value)], int(time.time() * 1000))
            try:
                leader = self._host.partition_state(self._topic.name, partition).leader
            except KafkaError:
                leader = -1
            if leader == self._host.node_id:
                await self._topic.append(partition, batch)
            elif leader >= 0:
                await self._send(leader, partition, batch)
            else:
                raise KafkaError(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{self._topic.name}-{partition} has no leader"
                )

    async def _send(self, leader: int, partition: int, batch: bytes) -> None:
        body = messages.encode_request(
            ApiKey.PRODUCE,
            _PRODUCE_VERSION,
            {
                "acks": -1,
                "timeout_ms": 30_000,
                "topic_data": [
                    {"name": self._topic.name, "partition_data": [{"index": partition, "records": batch}]}
                ],
            },
        )
        try:
            raw = await self._pool.request(leader, ApiKey.PRODUCE, _PRODUCE_VERSION, body)
            resp = messages.decode_response(ApiKey.PRODUCE, _PRODUCE_VERSION, raw)
        except (ConnectionError, TimeoutError, OSError) as e:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"share state not stored: {e}") from e
        code = resp.responses[0].partition_responses[0].error_code
        if code:
            raise KafkaError(ErrorCode(code), f"share state not stored on broker {leader}")

    def close(self) -> None:
        self._pool.close()


def share_settings(configs: Mapping[str, str]) -> ShareSettings:
    """A group's share settings from its group configs (Kafka's names; defaults where unset)."""
    d = ShareSettings()
    return ShareSettings(
        lock_duration_ms=int(configs.get("share.record.lock.duration.ms", d.lock_duration_ms)),
        delivery_count_limit=int(configs.get("share.delivery.count.limit", d.delivery_count_limit)),
        max_record_locks=int(configs.get("share.partition.max.record.locks", d.max_record_locks)),
        auto_offset_reset=configs.get("share.auto.offset.reset", d.auto_offset_reset),
        read_committed=configs.get("share.isolation.level", "read_uncommitted") == "read_committed",
    )


def share_timings(configs: Mapping[str, str]) -> tuple[int, int]:
    return (
        int(configs.get("share.session.timeout.ms", 45000)),
        int(configs.get("share.heartbeat.interval.ms", 5000)),
    )
