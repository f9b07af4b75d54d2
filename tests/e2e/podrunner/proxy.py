"""The kube-proxy part: every ClusterIP Service with a selector listens on 127.0.0.1:<service port>
and forwards each TCP connection to one of its endpoints (round robin): the ready, non-terminating
pods its selector matches (not-ready ones too with publishNotReadyAddresses), at the host port of the
targetPort (a number or a container port's name). A NodePort Service also listens on each port's
nodePort, as every node would (the fake nodes' address is 127.0.0.1). Headless Services (clusterIP
None) get no proxy: their names resolve to pods directly (see podspec). Two Services on one port: the
second is skipped with a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections.abc import Mapping
from typing import Any

from .podspec import POD_IP, resolve_port
from .ports import PortAllocator

log = logging.getLogger("podrunner.proxy")
JSON = dict[str, Any]
Key = tuple[str, str, int]  # namespace, service, port


def terminating(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def running_and_ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or terminating(pod):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def endpoints(service: JSON, pods: list[JSON], ports: PortAllocator) -> dict[int, list[int]]:
    """Service port → host ports of its endpoints."""
    meta = service["metadata"]
    spec = service.get("spec") or {}
    selector = spec.get("selector") or {}
    include_unready = bool(spec.get("publishNotReadyAddresses"))
    out: dict[int, list[int]] = {}
    for sp in spec.get("ports") or []:
        backends = []
        for p in pods:
            pm = p.get("metadata") or {}
            if pm.get("namespace") != meta.get("namespace") or not _matches(selector, pm.get("labels") or {}):
                continue
            if terminating(p) or not (include_unready or running_and_ready(p)):
                continue
            number = resolve_port(p, sp.get("targetPort", sp["port"]))
            if number is not None:
                backends.append(ports.pod_port(str(pm["namespace"]), str(pm["name"]), number))
        out[int(sp["port"])] = sorted(backends)
    return out


class ServiceProxy:
    def __init__(self, ports: PortAllocator) -> None:
        self.ports = ports
        self.servers: dict[Key, asyncio.Server] = {}
        self.backends: dict[Key, list[int]] = {}
        self._rr: dict[Key, itertools.count[int]] = {}
        self._failed: set[Key] = set()

    async def sync(self, services: list[JSON], pods: list[JSON]) -> None:
        want: dict[Key, list[int]] = {}
        for svc in services:
            spec = svc.get("spec") or {}
            if (
                spec.get("clusterIP") == "None"
                or not spec.get("selector")
                or spec.get("type") == "ExternalName"
            ):
                continue
            ns, name = str(svc["metadata"]["namespace"]), str(svc["metadata"]["name"])
            by_port = endpoints(svc, pods, self.ports)
            for port, backends in by_port.items():
                want[(ns, name, port)] = backends
            if spec.get("type") == "NodePort":
                for sp in spec.get("ports") or []:
                    if sp.get("nodePort"):
                        want[(ns, f"{name} (node port)", int(sp["nodePort"]))] = by_port.get(
                            int(sp["port"]), []
                        )
        for key in list(self.servers):
            if key not in want:
                server = self.servers.pop(key)
                server.close()
                self.backends.pop(key, None)
        used = {k[2] for k in self.servers}
        for key, backends in want.items():
            self.backends[key] = backends
            if key in self.servers:
                continue
            if key[2] in used:
                if key not in self._failed:
                    log.warning("service %s/%s: port %d is taken by another service", key[0], key[1], key[2])
                    self._failed.add(key)
                continue
            try:
                self.servers[key] = await asyncio.start_server(
                    functools.partial(self._handle, key), POD_IP, key[2], reuse_address=True
                )
                used.add(key[2])
                self._rr[key] = itertools.count()
                log.info("service %s/%s: proxy on %s:%d", key[0], key[1], POD_IP, key[2])
            except OSError as e:
                if key not in self._failed:
                    log.warning("service %s/%s: cannot listen on %d: %s", key[0], key[1], key[2], e)
                    self._failed.add(key)

    async def close(self) -> None:
        for server in self.servers.values():
            server.close()
        for server in self.servers.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
        self.servers.clear()

    async def _handle(self, key: Key, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        backends = list(self.backends.get(key) or [])
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        if backends:
            start = next(self._rr[key])
            for i in range(len(backends)):
                port = backends[(start + i) % len(backends)]
                try:
                    upstream = await asyncio.wait_for(asyncio.open_connection(POD_IP, port), 5)
                    break
                except (OSError, TimeoutError):
                    continue
        if upstream is None:
            writer.close()
            return
        up_reader, up_writer = upstream

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                with contextlib.suppress(OSError, RuntimeError):
                    dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
