"""Connections from this broker to the others over the inter-broker listener, for one kind of request:
one connection per broker, one request at a time on it (as Kafka's per-destination channels)."""

from __future__ import annotations

import asyncio
from typing import Protocol

from brook.protocol.errors import ErrorCode, KafkaError
from brook.replication.peer import PeerConnection
from brook.settings.broker import BrokerSettings

from .inter_broker import peer_security


class PeerHost(Protocol):
    @property
    def node_id(self) -> int: ...
    @property
    def settings(self) -> BrokerSettings: ...
    def endpoint(self, node_id: int, listener: str | None = None) -> tuple[str, int] | None: ...


class PeerPool:
    def __init__(self, broker: PeerHost, purpose: str) -> None:
        self._broker = broker
        self._client_id = f"brook-{purpose}-{broker.node_id}"
        self._peers: dict[int, tuple[PeerConnection, asyncio.Lock]] = {}

    async def request(self, node: int, api_key: int, version: int, body: bytes) -> memoryview:
        """The response body; on a failure (ConnectionError, TimeoutError, OSError, KafkaError) the
        connection is dropped, so the next request opens a new one."""
        try:
            conn, lock = self._peer(node)
            async with lock:
                return await conn.request(api_key, version, body)
        except (ConnectionError, TimeoutError, OSError, KafkaError):
            self._drop(node)
            raise

    def _peer(self, node: int) -> tuple[PeerConnection, asyncio.Lock]:
        entry = self._peers.get(node)
        endpoint = self._broker.endpoint(node)
        if endpoint is None:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"broker {node} is not live")
        if entry is None or (entry[0].host, entry[0].port) != endpoint:
            self._drop(node)
            security = peer_security(self._broker.settings)
            conn = PeerConnection(
                endpoint[0],
                endpoint[1],
                self._client_id,
                ssl_context=security.ssl_context,
                authenticate=security.authenticate,
            )
            entry = self._peers[node] = (conn, asyncio.Lock())
        return entry

    def _drop(self, node: int) -> None:
        entry = self._peers.pop(node, None)
        if entry is not None:
            entry[0].close()

    def close(self) -> None:
        for node in list(self._peers):
            self._drop(node)
