"""Run one broker until SIGINT/SIGTERM, then stop it cleanly (connections, timers, logs flushed)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable

from brook.broker.broker import Broker
from brook.broker.settings import BrokerSettings

from .listener import KafkaServer

log = logging.getLogger(__name__)


async def serve(settings: BrokerSettings, on_ready: Callable[[KafkaServer], None] | None = None) -> None:
    broker = Broker(settings)
    await broker.start()
    server = KafkaServer(broker)
    try:
        await server.start()
        if on_ready is not None:
            on_ready(server)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("stopping broker %d", settings.node_id)
    finally:
        await server.stop()
        await broker.stop()


def run(settings: BrokerSettings, on_ready: Callable[[KafkaServer], None] | None = None) -> None:
    if settings.event_loop == "uvloop":
        try:
            import uvloop
        except ImportError:
            sys.exit("uvloop is not installed: pip install 'brook[fast]', or use --event-loop asyncio")
        with contextlib.suppress(KeyboardInterrupt):
            uvloop.run(serve(settings, on_ready))
        return
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(settings, on_ready))
