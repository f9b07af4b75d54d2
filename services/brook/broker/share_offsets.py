"""A share group's start offsets across the cluster, for the share offsets APIs (90-92) its coordinator
answers. A share-partition's state lives with its partition's leader (share/coordinator.py), so the
coordinator reads, resets and deletes it there: itself when it leads the partition, else through Kafka's
share-state RPCs sent to the leader (ReadShareGroupStateSummary 87, InitializeShareGroupState 83,
DeleteShareGroupState 86), which handlers/share_state.py answers with the `local_*` functions below.
Only the leader changes a share-partition, so a reset can never be overwritten by a leader's older copy.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.versions import ApiKey
from brook.replication.replica import LeaderAndIsr
from brook.settings.broker import BrokerSettings
from brook.share.coordinator import ShareCoordinator
from brook.share.state_records import ShareKey

from .peer_pool import PeerPool
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

__all__ = ["Part", "ShareOffsets", "StateSummary", "local_delete", "local_initialize", "local_summary"]

Part = tuple[bytes, int]  # (topic id, partition)
_T = TypeVar("_T")
_SUMMARY_VERSION = 1


@dataclass(frozen=True, slots=True)
class StateSummary:
    start_offset: int  # -1: the share-partition has no state
    state_epoch: int
    leader_epoch: int
    done: int  # records at or past the start offset delivered to completion


class ShareOffsetsHost(Protocol):
    """What this needs of its broker (brook.broker.broker.Broker)."""

    @property
    def node_id(self) -> int: ...
    @property
    def settings(self) -> BrokerSettings: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def share(self) -> ShareCoordinator: ...
    def partition_state(self, topic: str, index: int) -> LeaderAndIsr: ...
    def endpoint(self, node_id: int, listener: str | None = None) -> tuple[str, int] | None: ...


def _led_here(host: ShareOffsetsHost, group: str, part: Part) -> tuple[ShareKey, int]:
    """The share-partition's key and the leader epoch, when this broker leads the partition."""
    meta = host.replicas.topic_by_id(part[0])
    if meta is None or not 0 <= part[1] < meta.partitions:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    p = host.replicas.partition(meta.name, part[1])
    if not p.leads_now:
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {host.node_id} does not lead it")
    return ShareKey(group, part[0], part[1]), p.leader_epoch


async def local_summary(host: ShareOffsetsHost, group: str, part: Part) -> StateSummary:
    key, epoch = _led_here(host, group, part)
    sp = await host.share.lookup(key)
    if sp is None:
        return StateSummary(-1, 0, epoch, 0)
    return StateSummary(sp.start_offset, sp.state_epoch, epoch, sp.done_count())


async def local_initialize(host: ShareOffsetsHost, group: str, part: Part, start: int) -> None:
    key, _ = _led_here(host, group, part)
    await host.share.reset(key, start)


async def local_delete(host: ShareOffsetsHost, group: str, part: Part) -> None:
    key, _ = _led_here(host, group, part)
    await host.share.forget(key)


def _by_topic(parts: Iterable[Part], entry: Callable[[Part], dict[str, Any]]) -> list[dict[str, Any]]:
    topics: dict[bytes, list[dict[str, Any]]] = {}
    for part in parts:
        topics.setdefault(part[0], []).append(entry(part))
    return [{"topic_id": t, "partitions": ps} for t, ps in topics.items()]


class ShareOffsets:
    def __init__(self, host: ShareOffsetsHost) -> None:
        self._host = host
        self._pool = PeerPool(host, "share-state")

    async def summaries(self, group: str, parts: Iterable[Part]) -> dict[Part, StateSummary | KafkaError]:
        async def remote(leader: int, ps: list[Part]) -> dict[Part, StateSummary | KafkaError]:
            body = {
                "group_id": group,
                "topics": _by_topic(ps, lambda p: {"partition": p[1], "leader_epoch": -1}),
            }
            resp = await self._call(leader, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, _SUMMARY_VERSION, body)
            out: dict[Part, StateSummary | KafkaError] = {}
            for r in resp.results:
                for p in r.partitions:
                    out[(_topic_id(r.topic_id), p.partition)] = (
                        KafkaError(ErrorCode(p.error_code), p.error_message or "")
                        if p.error_code
                        else StateSummary(
                            p.start_offset, p.state_epoch, p.leader_epoch, p.delivery_complete_count
                        )
                    )
            return out

        return await self._fan_out(parts, lambda p: local_summary(self._host, group, p), remote)

    async def initialize(self, group: str, starts: dict[Part, int]) -> dict[Part, KafkaError | None]:
        async def remote(leader: int, ps: list[Part]) -> dict[Part, KafkaError | None]:
            def entry(p: Part) -> dict[str, Any]:
                return {"partition": p[1], "state_epoch": 0, "start_offset": starts[p]}

            body = {"group_id": group, "topics": _by_topic(ps, entry)}
            return _errors(await self._call(leader, ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, body))

        async def local(p: Part) -> None:
            await local_initialize(self._host, group, p, starts[p])

        return _none_for_ok(await self._fan_out(starts, local, remote))

    async def delete(self, group: str, parts: Iterable[Part]) -> dict[Part, KafkaError | None]:
        async def remote(leader: int, ps: list[Part]) -> dict[Part, KafkaError | None]:
            body = {"group_id": group, "topics": _by_topic(ps, lambda p: {"partition": p[1]})}
            return _errors(await self._call(leader, ApiKey.DELETE_SHARE_GROUP_STATE, 0, body))

        return _none_for_ok(await self._fan_out(parts, lambda p: local_delete(self._host, group, p), remote))

    def close(self) -> None:
        self._pool.close()

    async def _call(self, leader: int, api: ApiKey, version: int, body: dict[str, Any]) -> Any:
        raw = await self._pool.request(leader, api, version, messages.encode_request(api, version, body))
        return messages.decode_response(api, version, raw)

    async def _fan_out(
        self,
        parts: Iterable[Part],
        local: Callable[[Part], Awaitable[_T]],
        remote: Callable[[int, list[Part]], Awaitable[dict[Part, Any]]],
    ) -> dict[Part, _T | KafkaError]:
        """Each part answered by its partition's leader: `local` here, `remote` once per other leader."""
        out: dict[Part, _T | KafkaError] = {}
        by_leader: dict[int, list[Part]] = {}
        for part in parts:
            meta = self._host.replicas.topic_by_id(part[0])
            try:
                if meta is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                leader = self._host.partition_state(meta.name, part[1]).leader
            except KafkaError as e:
                out[part] = e
                continue
            if leader < 0:
                out[part] = KafkaError(ErrorCode.LEADER_NOT_AVAILABLE)
            else:
                by_leader.setdefault(leader, []).append(part)

        async def here(part: Part) -> None:
            try:
                out[part] = await local(part)
            except KafkaError as e:
                out[part] = e

        async def there(leader: int, ps: list[Part]) -> None:
            try:
                answered = await remote(leader, ps)
            except (ConnectionError, TimeoutError, OSError, KafkaError) as e:
                log.info("share-state request to broker %d failed: %s", leader, e)
                answered = {}
            for p in ps:  # a partition the leader did not answer for: as unreachable
                out[p] = answered.get(p, KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"broker {leader}"))

        mine = by_leader.pop(self._host.node_id, [])
        await asyncio.gather(*(here(p) for p in mine), *(there(n, ps) for n, ps in by_leader.items()))
        return out


def _topic_id(value: Any) -> bytes:
    """A decoded uuid field (uuid.UUID) as the 16 bytes topic ids are kept in."""
    return value.bytes if isinstance(value, uuid.UUID) else bytes(value)


def _errors(resp: Any) -> dict[Part, KafkaError | None]:
    return {
        (_topic_id(r.topic_id), p.partition): KafkaError(ErrorCode(p.error_code), p.error_message or "")
        if p.error_code
        else None
        for r in resp.results
        for p in r.partitions
    }


def _none_for_ok(results: dict[Part, Any]) -> dict[Part, KafkaError | None]:
    return {p: r if isinstance(r, KafkaError) else None for p, r in results.items()}
