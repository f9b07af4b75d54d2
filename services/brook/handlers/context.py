"""What every handler receives, and the shape of what it returns."""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from brook.broker.broker import Broker
from brook.protocol.fetch import RecordsRef
from brook.protocol.frames import RequestHeader

# A response body: bytes, or pieces where record payloads stay file ranges for sendfile.
Body = bytes | list[bytes | RecordsRef]
# None: no response at all (Produce with acks=0).
Handler = Callable[[Broker, RequestHeader], Awaitable[Body | None]]

ZERO_UUID = uuid.UUID(int=0)

# The client's address, set by the connection's task (each connection runs in its own context).
CLIENT_HOST: contextvars.ContextVar[str] = contextvars.ContextVar("client_host", default="")


def uuid_bytes(value: Any) -> bytes:
    """A decoded UUID field (uuid.UUID, bytes or None) as 16 bytes."""
    if value is None:
        return ZERO_UUID.bytes
    if isinstance(value, uuid.UUID):
        return value.bytes
    return bytes(value)


def as_uuid(raw: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=raw)
