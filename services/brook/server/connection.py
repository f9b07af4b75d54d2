"""One client connection: frames in, requests answered strictly in order, responses out.

Requests are answered in the order they came, and handled one at a time, but for consecutive Produce
requests: each of those is appended as soon as it is read and answered in turn, so a producer with
several requests in flight (librdkafka: up to 5, idempotent) has them all replicating at once instead
of each waiting for the acks=all commit of the one before (the appends keep the requests' order:
handlers.context.AppendOrder). Not
on SASL listeners, nor while client quotas are configured: there each request waits for the one before.
Reading pauses when too many requests are queued and resumes as they are answered, so a fast client
cannot exhaust memory. Each pipelined request's handler runs at once (a task only carries on one that
has to wait: start_eagerly), and the answers ready together go out in one write.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import logging
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from typing import Any, cast

from brook.broker.broker import Broker
from brook.handlers.context import (
    APPEND_ORDER,
    CLIENT_HOST,
    CONNECTION,
    LISTENER_NAME,
    PRINCIPAL,
    THROTTLE_MS,
    AppendOrder,
)
from brook.handlers.sasl import SASL_SESSION, legacy_token
from brook.log.file_slice import FileSlice
from brook.protocol.fetch import RecordsRef
from brook.protocol.frame_buffer import FrameBuffer, FrameTooLarge
from brook.protocol.frames import RequestHeader, parse_request
from brook.protocol.primitives import CodecError
from brook.protocol.versions import ApiKey
from brook.security.listeners import Listener
from brook.security.sasl import SaslSession
from brook.security.tls import principal_of
from brook.tasks import wait_finished

from .dispatch import CloseConnection, dispatch

log = logging.getLogger(__name__)

# A handler's answer: the response pieces (None: none is due) and the throttle time it set.
Answer = tuple[list[bytes | RecordsRef] | None, int]

_MAX_QUEUED = 64
# Reading also pauses past this many bytes of requests read and not yet started: 64 queued frames of
# up to socket.request.max.bytes each would let one client pin gigabytes (Kafka reads one at a time).
_MAX_QUEUED_BYTES = 16 * 1024 * 1024
_CLIENT_BIG_START = 256 * 1024
_MAX_PIPELINED = 16  # Produce requests appended ahead of their answers


class Connection(asyncio.BufferedProtocol):
    """Frames are received straight into their final buffers (BufferedProtocol and FrameBuffer: no
    intermediate copies)."""

    def __init__(
        self,
        broker: Broker,
        max_request_bytes: int,
        native_sendfile: bool,
        on_close: Callable[[Connection], None],
        listener: Listener | None = None,
        admit: Callable[[Connection], bool] | None = None,
    ) -> None:
        self._broker = broker
        self._admit = admit
        self._listener = listener
        self._native_sendfile = native_sendfile
        self._on_close = on_close
        # A large request's own buffer starts at 256 KiB (or what arrived) and doubles: 4 bytes of size
        # header do not buy a client 1 MiB (-30 MB of RSS under 400 fuzzing connections; +40 us to
        # receive a 1 MB Produce request, 2% of the broker's CPU per GB).
        self._in = FrameBuffer(max_request_bytes, big_start_bytes=_CLIENT_BIG_START)
        self._frames = self._in.frames
        self._wakeup: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None
        self._reading_paused = False
        self._sendfile_active = False
        self._closed = False
        self.peer = "?"
        self.ip = ""
        self.admitted = False  # counted by the connection limits (released when it closes)

    # -- asyncio.BufferedProtocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not an isinstance check: uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.ip = str(peer[0]) if peer else ""
        if self._admit is not None:
            if not self._admit(self):
                self._closed = True
                self._transport.abort()  # over a connection limit: closed at once, nothing read
                return
            self.admitted = True
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._in.view()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self._in.received(nbytes)
        except FrameTooLarge as e:
            log.warning(
                "%s: request of %d bytes exceeds socket.request.max.bytes=%d; closing",
                self.peer,
                e.size,
                e.limit,
            )
            self.close()
            return
        if self._frames:
            if self._wakeup is not None and not self._wakeup.done():
                self._wakeup.set_result(None)
            full = len(self._frames) >= _MAX_QUEUED or self._in.queued_bytes >= _MAX_QUEUED_BYTES
            if full and self._transport and not self._reading_paused:
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
        CLIENT_HOST.set("/" + self.peer.rsplit(":", 1)[0])
        CONNECTION.set(self)
        APPEND_ORDER.set(AppendOrder())
        session = self._authentication()
        pipelined: deque[asyncio.Future[Answer]] = deque()
        try:
            while not self._closed:
                # Produce requests start at once; their answers go out in order below. Not on a SASL listener
                # (each request may change the session's state) nor while client quotas exist (a throttled
                # answer mutes the connection before the next request is read, KIP-219).
                while (
                    session is None
                    and not self._broker.quotas.configs
                    and self._frames
                    and _is_produce(self._frames[0])
                    and len(pipelined) < _MAX_PIPELINED
                ):
                    hdr = parse_request(self._next_frame())
                    pipelined.append(start_eagerly(loop, self._handle(hdr)))
                if pipelined:
                    head = pipelined[0]
                    if not head.done():
                        self._wakeup = loop.create_future()
                        await asyncio.wait((head, self._wakeup), return_when=asyncio.FIRST_COMPLETED)
                        self._wakeup = None
                        continue  # the head's answer, or more requests to start
                    # Every answer that is ready goes out in one write (one send for many small requests).
                    ready: list[bytes | RecordsRef] = []
                    throttle_ms = 0
                    while pipelined and pipelined[0].done() and not throttle_ms:
                        pieces, throttle_ms = pipelined.popleft().result()
                        if pieces is not None:
                            ready += pieces
                    await self._answer(ready, throttle_ms)
                    continue
                if not self._frames:
                    self._wakeup = loop.create_future()
                    await self._wakeup
                    self._wakeup = None
                    continue
                frame = self._next_frame()
                if session is not None and session.raw_tokens:
                    reply = legacy_token(self._broker, session, bytes(frame))
                    if reply is not None:
                        await self._write([reply])
                else:
                    await self._answer(*(await self._handle(parse_request(frame))))
                if session is not None and session.failed:
                    # Kafka answers, then closes after connection.failed.authentication.delay.ms (which
                    # slows down password guessing).
                    await asyncio.sleep(session.settings.failed_authentication_delay_ms / 1000)
                    self.close()
                    return
        except asyncio.CancelledError:
            pass
        except (CodecError, CloseConnection) as e:
            log.warning("%s: %s; closing the connection", self.peer, e)
            self.close()
        except ConnectionError as e:  # the client went away in the middle of a response
            log.debug("%s: %s; closing the connection", self.peer, e)
            self.close()
        except Exception:
            log.exception("%s: request failed; closing the connection", self.peer)
            self.close()
        finally:
            for t in pipelined:  # the connection is going: no answer is due
                if t.done() and not t.cancelled():
                    t.exception()  # retrieved: a failure after the connection's end is not logged
                t.cancel()
            # close() defers to here while a sendfile is in flight (see close()).
            if self._closed and self._transport is not None and not self._transport.is_closing():
                self._transport.close()

    def _next_frame(self) -> bytearray:
        frame = self._in.take()
        if (
            self._reading_paused
            and len(self._frames) < _MAX_QUEUED // 2
            and self._in.queued_bytes < _MAX_QUEUED_BYTES // 2
            and self._transport
        ):
            self._reading_paused = False
            self._transport.resume_reading()
        return frame

    async def _handle(self, hdr: RequestHeader) -> Answer:
        """The response pieces (None: none is due) and the throttle time the handler set."""
        THROTTLE_MS.set(0)  # in this task's or this request's context
        pieces = await dispatch(self._broker, hdr)
        return pieces, THROTTLE_MS.get()

    async def _answer(self, pieces: list[bytes | RecordsRef] | None, throttle_ms: int) -> None:
        if pieces is not None:
            await self._write(pieces)
        if throttle_ms > 0:
            # KIP-219: the answer goes at once, then the connection is muted while throttled.
            await asyncio.sleep(throttle_ms / 1000)

    def _authentication(self) -> SaslSession | None:
        """The connection's listener and principal in its context; its SASL session on a SASL listener."""
        listener = self._listener
        if listener is None:
            return None
        LISTENER_NAME.set(listener.name)
        if listener.tls and self._transport is not None:
            principal = principal_of(self._transport.get_extra_info("ssl_object"))
            if principal is not None:
                PRINCIPAL.set(principal)
        if not listener.sasl:
            return None
        broker = self._broker
        session = SaslSession(
            broker.settings.sasl, lambda user: broker.scram_credentials().get(user, {}), broker.tokens
        )
        SASL_SESSION.set(session)
        return session

    async def _write(self, pieces: list[bytes | RecordsRef]) -> None:
        transport = self._transport
        assert transport is not None
        pending: list[bytes] = []
        for piece in pieces:
            if isinstance(piece, bytes):
                pending.append(piece)
                continue
            records = cast(FileSlice, piece)  # the log's RecordsRef
            if not self._native_sendfile:
                pending.append(_read(records))
                continue
            if not _send(transport, pending):
                return
            pending = []
            await self._sendfile(transport, records)
        if _send(transport, pending) and self._drained is not None:
            await self._drained

    async def _sendfile(self, transport: asyncio.Transport, piece: FileSlice) -> None:
        """Zero-copy: the kernel moves the segment range to the socket (after the bytes queued before it)."""
        if transport.is_closing():
            return
        self._sendfile_active = True
        try:
            await asyncio.get_running_loop().sendfile(
                transport, piece.file, piece.position, piece.size, fallback=False
            )
        except asyncio.SendfileNotAvailableError:
            # Raised only when nothing was sent (the first os.sendfile failed, often because the client has
            # gone, or the disk): send the range as bytes; a dead socket then closes the transport as any
            # write does, a failed read takes the log directory offline (FileSlice.read) and this connection.
            _send(transport, [_read(piece)])
        except OSError as e:
            if e.errno != errno.EIO:  # the socket's side: EPIPE, ECONNRESET ...
                raise
            piece.report(e)
            raise CloseConnection(f"reading the log for a response failed: {e.strerror}") from e
        finally:
            self._sendfile_active = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._sendfile_active and self._task is not None:
            # Never close the transport under an in-flight sendfile: the socket would be closed while
            # sock_sendfile still has a writer registered for it, and its cleanup runs an iteration later
            # (after the fd number may belong to a new connection). Cancel the sendfile; _serve's finally
            # closes the transport once it has unwound.
            self._task.cancel()
            return
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Drop the connection at once: no TLS close_notify exchange, unsent bytes discarded. Not under
        an in-flight sendfile (see close(): its task is cancelled and closes the transport)."""
        self._closed = True
        if self._transport is not None and not self._sendfile_active:
            self._transport.abort()

    async def wait_closed(self) -> None:
        if self._task is not None:
            await wait_finished(self._task)


def _send(transport: asyncio.Transport, data: list[bytes]) -> bool:
    """Write `data` unless the transport is closing (the response is then dropped); False: it is closing.

    Not only pointless: on Python 3.12+ writelines() on a transport whose connection is lost (not yet
    reported to connection_lost) registers a writer for a socket about to be closed (CPython gh-136234).
    The stale selector key makes the next connection given that fd number fail to start reading
    (FileNotFoundError in _add_reader), and that client is never answered.
    """
    if transport.is_closing():
        return False
    if data:
        transport.writelines(data)
    return True


def _is_produce(frame: bytearray) -> bool:
    return len(frame) >= 2 and int.from_bytes(frame[:2], "big") == ApiKey.PRODUCE


def start_eagerly(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Answer]
) -> asyncio.Future[Answer]:
    """Run a request's handler at once, as far as it goes without waiting (an acks=1 Produce: all the
    way), in a context of its own as a task would have; a task carries on only if it has to wait. A task
    per request cost its creation and a loop iteration before it even started (Python 3.12's eager tasks)."""
    ctx = contextvars.copy_context()
    try:
        waiting_on = ctx.run(coro.send, None)
    except StopIteration as done:
        fut: asyncio.Future[Answer] = loop.create_future()
        fut.set_result(done.value)
        return fut
    except Exception as e:
        fut = loop.create_future()
        fut.set_exception(e)
        return fut
    return loop.create_task(_carry_on(coro, waiting_on), context=ctx)


async def _carry_on(coro: Coroutine[Any, Any, Answer], waiting_on: Any) -> Answer:
    # A coroutine for the task: from Python 3.12 on, create_task takes no generator-based coroutine.
    return await _Resumed(coro, waiting_on)


class _Resumed:
    """Awaiting it drives a started coroutine from its first wait on (see _resume)."""

    __slots__ = ("_coro", "_waiting_on")

    def __init__(self, coro: Coroutine[Any, Any, Answer], waiting_on: Any) -> None:
        self._coro = coro
        self._waiting_on = waiting_on

    def __await__(self) -> Generator[Any, Any, Answer]:
        return _resume(self._coro, self._waiting_on)


def _resume(coro: Coroutine[Any, Any, Answer], waiting_on: Any) -> Generator[Any, Any, Answer]:
    """Drive a started coroutine from its first wait on: hand its future to the task, and the task's
    wake-ups (results, cancellation) back to it."""
    while True:
        try:
            sent = yield waiting_on
        except BaseException as e:
            try:
                waiting_on = coro.throw(e)
            except StopIteration as done:
                return cast(Answer, done.value)
        else:
            try:
                waiting_on = coro.send(sent)
            except StopIteration as done:
                return cast(Answer, done.value)


def _read(piece: FileSlice) -> bytes:
    """A slice's bytes; a failed read (reported to its log directory by FileSlice) ends the connection,
    whose response is already under way, without a traceback."""
    try:
        return piece.read()
    except OSError as e:
        raise CloseConnection(f"reading the log for a response failed: {e.strerror}") from e
