"""The Kafka listener: accepts connections on the broker's port and tracks them for shutdown."""

from __future__ import annotations

import asyncio
import logging

from brook.broker.broker import Broker

from .connection import Connection

log = logging.getLogger(__name__)


def loop_has_native_sendfile(loop: asyncio.AbstractEventLoop) -> bool:
    # uvloop raises NotImplementedError for loop.sendfile; only the stdlib selector loop does it natively.
    return type(loop).__module__.startswith("asyncio")


class KafkaServer:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._server: asyncio.Server | None = None
        self.connections: set[Connection] = set()
        self.port = broker.settings.port

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        native = loop_has_native_sendfile(loop)
        s = self.broker.settings

        def factory() -> Connection:
            conn = Connection(self.broker, s.max_request_bytes, native, self.connections.discard)
            self.connections.add(conn)
            return conn

        self._server = await loop.create_server(factory, s.host, s.port, reuse_address=True, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("listening on %s:%d (sendfile: %s)", s.host, self.port, native)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        for conn in list(self.connections):
            await conn.wait_closed()
        self.connections.clear()
