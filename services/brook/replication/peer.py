"""A connection from this broker to another one (the follower's link to its leader).

Requests go one at a time (Kafka brokers answer a connection in order anyway); a lost connection is
reported to the caller, which reconnects after a back-off.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Awaitable, Callable

from brook.protocol.frames import parse_response_header, request_frame
from brook.protocol.versions import response_is_flexible

# Runs on each new connection before it is used (SASL on the inter-broker listener); raises
# ConnectionError when the other broker refuses it.
Authenticate = Callable[["PeerConnection"], Awaitable[None]]


class PeerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        timeout_s: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        authenticate: Authenticate | None = None,
    ) -> None:
        self.host, self.port = host, port
        self._ssl = ssl_context
        self._authenticate = authenticate
        self._client_id = client_id
        self._timeout = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._cid = 0

    async def connect(self) -> None:
        async with asyncio.timeout(self._timeout):  # (asyncio.wait_for can swallow a cancel on 3.11)
            self._reader, self._writer = await asyncio.open_connection(
                self.host,
                self.port,
                limit=64 * 1024 * 1024,
                ssl=self._ssl,
                server_hostname=self.host if self._ssl is not None else None,
            )
        if self._authenticate is not None:
            try:
                await self._authenticate(self)
            except BaseException:
                self.close()
                raise

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def request(self, api_key: int, version: int, body: bytes) -> memoryview:
        """Send one request and return the response body; ConnectionError/TimeoutError when it fails."""
        if self._reader is None or self._writer is None:
            await self.connect()
        assert self._reader is not None and self._writer is not None
        self._cid = (self._cid + 1) & 0x7FFFFFFF
        self._writer.write(request_frame(api_key, version, self._cid, self._client_id, body))
        try:
            await self._writer.drain()
            async with asyncio.timeout(self._timeout):
                size = struct.unpack(">i", await self._reader.readexactly(4))[0]
                frame = await self._reader.readexactly(size)
        except (asyncio.IncompleteReadError, OSError, TimeoutError) as e:
            self.close()
            raise ConnectionError(f"lost connection to broker {self.host}:{self.port}: {e!r}") from e
        cid, resp = parse_response_header(frame, response_is_flexible(api_key, version))
        if cid != self._cid:
            self.close()
            raise ConnectionError(f"correlation id {cid} does not match {self._cid}")
        return resp

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
