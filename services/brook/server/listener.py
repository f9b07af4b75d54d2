"""The Kafka listener: accepts connections on the broker's port and tracks them for shutdown."""

from __future__ import annotations

import asyncio
import logging

from brook.broker.broker import Broker
from brook.security.connection_limits import ConnectionLimiter, quiet_accept_errors, raise_open_file_limit
from brook.security.listeners import Listener
from brook.security.tls import ReloadingContext, for_listener

from .connection import Connection

STOP_GRACE_S = 1.0  # how long stop() lets connections close cleanly before aborting them

log = logging.getLogger(__name__)


def loop_has_native_sendfile(loop: asyncio.AbstractEventLoop) -> bool:
    # uvloop raises NotImplementedError for loop.sendfile; only the stdlib selector loop does it natively.
    return type(loop).__module__.startswith("asyncio")


class KafkaServer:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._servers: list[asyncio.Server] = []
        self.connections: set[Connection] = set()
        self.port = broker.settings.port  # the first listener's
        self.ports: dict[str, int] = {}  # by listener name
        self.open_files = raise_open_file_limit()
        self.limits = ConnectionLimiter(
            broker.settings.connection_limits, self.open_files, broker.metrics.on_connection_refused
        )

    async def start(self) -> None:
        quiet_accept_errors(asyncio.get_running_loop())
        log.info("open files limit %d, max.connections %d", self.open_files, self.limits.max_connections)
        for listener in self.broker.settings.effective_listeners():
            await self._listen(listener)

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        self.broker.share.connection_closed(conn)
        if conn.admitted:
            self.limits.release(conn.ip)

    async def _listen(self, listener: Listener) -> None:
        loop = asyncio.get_running_loop()
        s = self.broker.settings
        tls = ReloadingContext(for_listener(s.tls, listener.name)) if listener.tls else None
        # Through a TLS transport the bytes must pass through Python (kTLS would need the raw socket).
        native = loop_has_native_sendfile(loop) and tls is None
        # A dedicated inter-broker listener is exempt from max.connections and the creation rate (Kafka:
        # replication must go on); a single listener serving both is not, or the limits would be void.
        exempt = len(s.effective_listeners()) > 1 and listener.name == s.inter_broker_listener().name

        def admit(conn: Connection) -> bool:
            return self.limits.admit(conn.ip, exempt)

        def factory() -> Connection:
            conn = Connection(self.broker, s.max_request_bytes, native, self._closed, listener, admit)
            self.connections.add(conn)
            return conn

        server = await loop.create_server(
            factory,
            listener.host,
            listener.port,
            reuse_address=True,
            backlog=1024,
            ssl=tls.context if tls is not None else None,
        )
        self._servers.append(server)
        port = server.sockets[0].getsockname()[1]
        if not self.ports:
            self.port = port
        self.ports[listener.name] = port
        log.info(
            "listener %s (%s) on %s:%d (sendfile: %s)",
            listener.name,
            listener.protocol,
            listener.host,
            port,
            native,
        )

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        conns = list(self.connections)
        for conn in conns:
            conn.close()
        # A TLS close waits for the peer's close_notify (asyncio: up to 30 s), which an idle client
        # that is not reading (a Java consumer between polls) never sends: abort what is left after a
        # grace, as Kafka's shutdown closes its sockets outright.
        waits = [asyncio.ensure_future(conn.wait_closed()) for conn in conns]
        if waits:
            await asyncio.wait(waits, timeout=STOP_GRACE_S)
        for conn, waited in zip(conns, waits, strict=True):
            if not waited.done():
                conn.abort()
            await waited
        self.connections.clear()
