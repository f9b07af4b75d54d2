"""One client connection: frames in, requests answered strictly in order, responses out.

Kafka answers one request at a time per connection; pipelined requests queue here. Reading pauses when
too many requests are queued and resumes as they are answered, so a fast client cannot exhaust memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable

from brook.broker.broker import Broker
from brook.protocol.fetch import RecordsRef
from brook.protocol.frames import parse_request
from brook.protocol.primitives import CodecError

from .dispatch import CloseConnection, dispatch

log = logging.getLogger(__name__)

_MAX_QUEUED = 64


class Connection(asyncio.Protocol):
    def __init__(
        self,
        broker: Broker,
        max_request_bytes: int,
        native_sendfile: bool,
        on_close: Callable[[Connection], None],
    ) -> None:
        self._broker = broker
        self._max = max_request_bytes
        self._native_sendfile = native_sendfile
        self._on_close = on_close
        self._buf = bytearray()
        self._frames: deque[bytes] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None
        self._reading_paused = False
        self._closed = False
        self.peer = "?"

    # -- asyncio.Protocol --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        while len(buf) >= 4:
            size = int.from_bytes(buf[:4], "big", signed=True)
            if size < 0 or size > self._max:
                log.warning(
                    "%s: request of %d bytes exceeds socket.request.max.bytes=%d; closing",
                    self.peer,
                    size,
                    self._max,
                )
                self.close()
                return
            if len(buf) < 4 + size:
                break
            self._frames.append(bytes(buf[4 : 4 + size]))
            del buf[: 4 + size]
        if self._frames:
            if self._wakeup is not None and not self._wakeup.done():
                self._wakeup.set_result(None)
            if len(self._frames) >= _MAX_QUEUED and self._transport and not self._reading_paused:
                self._reading_paused = True
                self._transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._on_close(self)

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    # -- request loop ------------------------------------------------------------------------------
    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self._closed:
                if not self._frames:
                    self._wakeup = loop.create_future()
                    await self._wakeup
                    self._wakeup = None
                    continue
                frame = self._frames.popleft()
                if self._reading_paused and len(self._frames) < _MAX_QUEUED // 2 and self._transport:
                    self._reading_paused = False
                    self._transport.resume_reading()
                hdr = parse_request(frame)
                pieces = await dispatch(self._broker, hdr)
                if pieces is not None:
                    await self._write(pieces)
        except asyncio.CancelledError:
            pass
        except (CodecError, CloseConnection) as e:
            log.warning("%s: %s; closing the connection", self.peer, e)
            self.close()
        except Exception:
            log.exception("%s: request failed; closing the connection", self.peer)
            self.close()

    async def _write(self, pieces: list[bytes | RecordsRef]) -> None:
        transport = self._transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        pending: list[bytes] = []
        for piece in pieces:
            if isinstance(piece, bytes):
                pending.append(piece)
                continue
            if not self._native_sendfile:
                pending.append(piece.read())  # type: ignore[attr-defined]
                continue
            if pending:
                transport.writelines(pending)
                pending = []
            # Zero-copy: the kernel moves the segment range to the socket (waits for buffered bytes first).
            await loop.sendfile(transport, piece.file, piece.position, piece.size, fallback=False)  # type: ignore[attr-defined]
        if pending:
            transport.writelines(pending)
        if self._drained is not None:
            await self._drained

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._transport is not None:
                self._transport.close()

    async def wait_closed(self) -> None:
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
