"""Run one broker until SIGINT/SIGTERM, then stop it cleanly (leaderships handed over, connections,
timers, logs flushed). Health and metrics are served on their own port from the start."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from brook.broker.broker import Broker
from brook.observability import MetricsServer
from brook.settings.broker import BrokerSettings
from brook.tasks import cancel_and_wait

from . import schema_registry
from .heap import HeapKeeper
from .listener import KafkaServer
from .state_view import BrokerState

if TYPE_CHECKING:  # imported when turned on: the `brook` CLI starts faster without its parsers
    from brook.registry import SchemaRegistry

log = logging.getLogger(__name__)


async def serve(settings: BrokerSettings, on_ready: Callable[[KafkaServer], None] | None = None) -> None:
    broker = Broker(settings)
    server = KafkaServer(broker)
    state = BrokerState(broker, server)
    started = False

    def ready() -> tuple[bool, str]:
        return state.ready() if started else (False, "starting")

    http: MetricsServer | None = None
    if settings.metrics_port >= 0:
        http = MetricsServer(broker.metrics.registry, ready)
        await http.start(settings.metrics_host, settings.metrics_port)
        log.info("metrics and health on http://%s:%d", settings.metrics_host, http.port)
    broker.metrics.attach(state)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    heap: asyncio.Task[None] | None = None
    registry: SchemaRegistry | None = None  # a Kafka client of this broker, started once it serves
    registry_start: asyncio.Task[None] | None = None
    try:
        await broker.start()
        await server.start()
        started = True
        keeper = HeapKeeper()
        keeper.started()
        heap = asyncio.create_task(keeper.run(), name="heap-keeper")
        if settings.schema_registry_port >= 0:
            registry = schema_registry.build(settings, server, broker)
            registry_start = asyncio.create_task(
                registry.start(
                    settings.schema_registry_host,
                    settings.schema_registry_port,
                    schema_registry.tls_context(settings),
                ),
                name="registry",
            )
            registry_start.add_done_callback(_report_registry)
        if on_ready is not None:
            on_ready(server)
        await stop.wait()
        log.info("stopping broker %d", settings.node_id)
    finally:
        if heap is not None:
            heap.cancel()
        if registry_start is not None:  # the registry is a client of this broker: it goes first
            await cancel_and_wait(registry_start)
        if registry is not None:
            await registry.stop()
        await broker.stop()  # a cluster member hands its leaderships over while still serving
        await server.stop()
        if http is not None:
            await http.stop()


def _report_registry(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the schema registry did not start: %s", task.exception())


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
