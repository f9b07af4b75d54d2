"""A Confluent-compatible Schema Registry served by Brook: the REST API Confluent's clients and
serializers use, compatibility checks for Avro, JSON Schema and Protobuf, and schemas kept in the
compacted `_schemas` topic in Confluent's record format.

It talks to the cluster only as a Kafka client does (confluent-kafka against a bootstrap address), so it
runs inside a broker process (`brook broker --schema-registry-port`) or beside one; every node serves
reads from its own copy of `_schemas`, and writes go through one transactional id (store.py says why ids
never collide).
"""

from __future__ import annotations

import logging
import ssl

from aiohttp import web

from .access import Access, Authorize
from .auth import ScramBasicAuth, basic_auth
from .http import RegistryApp
from .service import Registry
from .store import SchemaStore

log = logging.getLogger(__name__)


class SchemaRegistry:
    def __init__(
        self,
        bootstrap: str,
        replication_factor: int = 1,
        client_config: dict[str, str] | None = None,
        topic: str = "_schemas",
        auth: ScramBasicAuth | None = None,
        authorize: Authorize | None = None,
    ) -> None:
        self.store = SchemaStore(bootstrap, replication_factor, topic=topic, client_config=client_config)
        self.registry = Registry(self.store)
        self._auth = auth
        self._access = Access(authorize) if authorize is not None else None
        self._runner: web.AppRunner | None = None
        self.host = ""
        self.port = 0

    async def start(
        self, host: str = "0.0.0.0", port: int = 0, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        """Read `_schemas` (created when missing), then listen on host:port (0: a free port)."""
        await self.store.start()
        runner = web.AppRunner(
            RegistryApp(self.registry, self._access).app([basic_auth(self._auth)] if self._auth else []),
            access_log=None,
            handle_signals=False,
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port, reuse_address=True, ssl_context=ssl_context)
            await site.start()
        except BaseException:
            await runner.cleanup()
            await self.store.stop()
            raise
        self._runner = runner
        address = runner.addresses[0]
        self.host, self.port = str(address[0]), int(address[1])
        scheme = "https" if ssl_context else "http"
        log.info("schema registry on %s://%s:%d", scheme, self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        await self.store.stop()


__all__ = ["Authorize", "Registry", "SchemaRegistry", "SchemaStore", "ScramBasicAuth"]
