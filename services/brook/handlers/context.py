"""What every handler receives, and the shape of what it returns."""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from brook.broker.broker import Broker
from brook.broker.partition import Partition
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.fetch import RecordsRef
from brook.protocol.frames import RequestHeader

# A response body: bytes, or pieces where record payloads stay file ranges for sendfile.
Body = bytes | list[bytes | RecordsRef]
# None: no response at all (Produce with acks=0).
Handler = Callable[[Broker, RequestHeader], Awaitable[Body | None]]

ZERO_UUID = uuid.UUID(int=0)

# The client's address, set by the connection's task (each connection runs in its own context).
CLIENT_HOST: contextvars.ContextVar[str] = contextvars.ContextVar("client_host", default="")
# Who the connection authenticated as (Kafka's KafkaPrincipal "User:<name>"), set by the connection once
# TLS or SASL has established it; the authorizer checks requests against it.
ANONYMOUS = "User:ANONYMOUS"
PRINCIPAL: contextvars.ContextVar[str] = contextvars.ContextVar("principal", default=ANONYMOUS)
# How long the connection reads no further request once this one is answered (quotas: KIP-219).
THROTTLE_MS: contextvars.ContextVar[int] = contextvars.ContextVar("throttle_ms", default=0)
# The connection the request arrived on, as an opaque token: share sessions end with theirs (Kafka
# 4.1, KAFKA-19015), releasing what their member held.
CONNECTION: contextvars.ContextVar[object | None] = contextvars.ContextVar("connection", default=None)


class AppendOrder:
    """Pipelined Produce requests of one connection (see the connection) append in the order they
    came: a producer's sequence numbers depend on it. One that waits before appending (KIP-890: the
    coordinator confirms the transaction first) holds back those behind it until it has appended;
    Kafka handles one request of a connection at a time."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: asyncio.Future[None] | None = None

    def before(self) -> asyncio.Future[None] | None:
        """The turn of the latest request that has not appended yet, if any."""
        last = self._last
        return None if last is None or last.done() else last

    def hold(self) -> asyncio.Future[None]:
        """Take a turn: requests from now on wait until it is released (set_result)."""
        self._last = asyncio.get_running_loop().create_future()
        return self._last


# Set by the connection for its requests; None: requests of the context are never pipelined.
APPEND_ORDER: contextvars.ContextVar[AppendOrder | None] = contextvars.ContextVar(
    "append_order", default=None
)
# The name of the listener the request arrived on (Metadata answers with that listener's addresses).
LISTENER_NAME: contextvars.ContextVar[str] = contextvars.ContextVar("listener_name", default="PLAINTEXT")


def uuid_bytes(value: Any) -> bytes:
    """A decoded UUID field (uuid.UUID, bytes or None) as 16 bytes."""
    if value is None:
        return ZERO_UUID.bytes
    if isinstance(value, uuid.UUID):
        return value.bytes
    return bytes(value)


def as_uuid(raw: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=raw)


def check_leader(p: Partition, current_leader_epoch: int = -1) -> None:
    """Requests for a partition's data go to its leader, in the epoch the client believes in. A leader
    fenced by its lease answers as no leader: deposed, maybe, its log may lack what the new one took."""
    if not p.leads_now:
        raise KafkaError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {p.node_id} does not lead {p.topic}-{p.index}"
        )
    check_epoch(p, current_leader_epoch)


def check_epoch(p: Partition, current_leader_epoch: int = -1) -> None:
    """The client's leader epoch (-1: unknown) must be this replica's: older is fenced, newer unknown."""
    if current_leader_epoch >= 0 and current_leader_epoch != p.leader_epoch:
        code = (
            ErrorCode.FENCED_LEADER_EPOCH
            if current_leader_epoch < p.leader_epoch
            else ErrorCode.UNKNOWN_LEADER_EPOCH
        )
        raise KafkaError(code, f"leader epoch is {p.leader_epoch}, the request has {current_leader_epoch}")
