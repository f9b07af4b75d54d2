"""The Kafka listener: accepts connections on the broker's port and tracks them for shutdown."""

from __future__ import annotations

import asyncio
import logging

from brook.broker.broker import Broker
from brook.security.listeners import Listener
from brook.security.tls import ReloadingContext, for_listener

from .connection import Connection

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

    async def start(self) -> None:
        for listener in self.broker.settings.effective_listeners():
            await self._listen(listener)

    async def _listen(self, listener: Listener) -> None:
        loop = asyncio.get_running_loop()
        s = self.broker.settings
        tls = ReloadingContext(for_listener(s.tls, listener.name)) if listener.tls else None
        # Through a TLS transport the bytes must pass through Python (kTLS would need the raw socket).
        native = loop_has_native_sendfile(loop) and tls is None

        def factory() -> Connection:
            conn = Connection(self.broker, s.max_request_bytes, native, self.connections.discard, listener)
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
        for conn in list(self.connections):
            conn.close()
        for conn in list(self.connections):
            await conn.wait_closed()
        self.connections.clear()
