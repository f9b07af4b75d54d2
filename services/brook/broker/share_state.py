"""Share groups' state store: the `__share_group_state` topic (brook.share.state_records' format) and
each group's share settings (group configs over the broker's defaults).

A share-partition's state is kept in the state partition its key hashes to; this broker reads a state
partition whole the first time it needs a key of it, then keeps its latest records in memory. Writes
are acks=all appends, done before the request that changed the state is answered. A state partition
led by another broker is not reachable from here (Brook has no WriteShareGroupState between
brokers): the share-partitions of such keys are kept in memory only, and a warning says so once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.group_records import build_batch, iter_records
from brook.share.partition import ShareSettings
from brook.share.state_records import (
    ShareKey,
    ShareSnapshot,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    key_hash,
)

from .internal_topics import InternalTopic

log = logging.getLogger(__name__)

__all__ = ["SHARE_STATE_TOPIC", "ShareStateTopic", "share_settings", "share_timings"]

SHARE_STATE_TOPIC = "__share_group_state"
STATE_PARTITIONS = 50  # Kafka's share.coordinator.state.topic.num.partitions
STATE_REPLICATION = 3


class ShareStateTopic:
    def __init__(self, topic: InternalTopic, partitions: int = STATE_PARTITIONS) -> None:
        self._topic = topic
        self._partitions = partitions
        self._loaded: dict[int, dict[ShareKey, ShareSnapshot]] = {}
        self._epochs: dict[int, int] = {}  # each loaded partition's leader epoch when it was read
        self._warned = False

    def _partition_of(self, key: ShareKey) -> int:
        return key_hash(key) % self._partitions

    async def _ready(self, partition: int) -> bool:
        if not self._topic.topic_exists(self._topic.name):
            await self._topic.ensure_topic(self._partitions, STATE_REPLICATION)
        if not self._topic.is_local_leader(partition):
            if not self._warned:
                self._warned = True
                log.warning(
                    "share: %s-%d is led by another broker; share state of its keys is kept in memory here",
                    self._topic.name,
                    partition,
                )
            return False
        epoch = self._topic.leader_epoch(partition)
        if self._epochs.get(partition) != epoch:  # led by another broker in between: read it again
            self._loaded.pop(partition, None)
        if partition not in self._loaded:
            found: dict[ShareKey, ShareSnapshot] = {}
            for chunk in self._topic.read_batches(partition):
                for _offset, raw_key, raw_value in iter_records(chunk):
                    key = decode_key(raw_key) if raw_key is not None else None
                    if key is None:
                        continue
                    if raw_value is None:
                        found.pop(key, None)
                    else:
                        found[key] = decode_value(raw_value)
            self._loaded[partition] = found
            self._epochs[partition] = epoch
        return True

    async def load(self, key: ShareKey) -> ShareSnapshot | None:
        partition = self._partition_of(key)
        if not await self._ready(partition):
            return None
        return self._loaded[partition].get(key)

    async def save(self, key: ShareKey, snapshot: Callable[[], ShareSnapshot | None]) -> None:
        partition = self._partition_of(key)
        if not await self._ready(partition):
            return
        snap = snapshot()  # taken now: the append below starts before any other write of this key
        value = encode_value(snap) if snap is not None else None
        batch = build_batch([(encode_key(key), value)], int(time.time() * 1000))
        if snap is None:
            self._loaded[partition].pop(key, None)
        else:
            self._loaded[partition][key] = snap
        try:
            await self._topic.append(partition, batch)
        except KafkaError as e:
            self._loaded.pop(partition, None)  # read it again once it is back
            raise KafkaError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"share state not stored: {e.message}"
            ) from e


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
