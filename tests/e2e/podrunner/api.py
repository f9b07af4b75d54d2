"""A small JSON-over-HTTP client of the Kubernetes API for the pod runner (plain aiohttp, no generated
classes): list, get, create, merge-patch, delete, POST to a subresource, and watches used as triggers.
TLS with the kubeconfig's CA and client certificate or token."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import yaml

log = logging.getLogger("podrunner.api")
JSON = dict[str, Any]


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class Connection:
    """Where and how to reach the API server: URL, a token or client certificate, the CA."""

    def __init__(
        self, server: str, token: str | None, ssl_context: ssl.SSLContext | None, ca_file: str | None = None
    ) -> None:
        self.server, self.token, self.ssl_context, self.ca_file = server, token, ssl_context, ca_file


def connection_of(kubeconfig: Path) -> Connection:
    cfg = yaml.safe_load(kubeconfig.read_text())
    ctx_name = cfg.get("current-context")
    ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
    cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
    user = next((u.get("user") or {} for u in cfg.get("users") or [] if u["name"] == ctx.get("user")), {})
    server = str(cluster["server"]).rstrip("/")
    context = None
    if server.startswith("https:"):
        context = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
        if user.get("client-certificate"):
            context.load_cert_chain(user["client-certificate"], user.get("client-key"))
    return Connection(server, user.get("token"), context, cluster.get("certificate-authority"))


def path(api_version: str, plural: str, namespace: str | None = None, name: str | None = None) -> str:
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{plural}"
    return f"{base}/{quote(name, safe='')}" if name else base


class Api:
    def __init__(
        self, server: str, token: str | None = None, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self.server = server
        self.ssl_context = ssl_context
        self._headers = {"Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                connector=aiohttp.TCPConnector(ssl=self.ssl_context if self.ssl_context else True),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        url_path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> JSON:
        headers = dict(self._headers)
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body)
        async with self.session.request(
            method,
            self.server + url_path,
            data=data,
            params=params,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=30),
        ) as resp:
            text = await resp.text()
            try:
                out = json.loads(text) if text else {}
            except ValueError:
                out = {"message": text}
            if resp.status >= 400:
                raise ApiError(resp.status, str(out.get("message", text)))
            return out if isinstance(out, dict) else {}

    async def list(self, api_version: str, plural: str, namespace: str | None = None) -> list[JSON]:
        data = await self.request("GET", path(api_version, plural, namespace))
        return [i for i in data.get("items") or [] if isinstance(i, dict)]

    async def get(self, api_version: str, plural: str, namespace: str | None, name: str) -> JSON | None:
        try:
            return await self.request("GET", path(api_version, plural, namespace, name))
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    async def create(self, api_version: str, plural: str, namespace: str | None, body: JSON) -> JSON:
        return await self.request("POST", path(api_version, plural, namespace), body=body)

    async def patch(
        self,
        api_version: str,
        plural: str,
        namespace: str | None,
        name: str,
        body: JSON,
        subresource: str | None = None,
    ) -> JSON:
        p = path(api_version, plural, namespace, name) + (f"/{subresource}" if subresource else "")
        return await self.request("PATCH", p, body=body, content_type="application/merge-patch+json")

    async def post_sub(
        self, api_version: str, plural: str, namespace: str | None, name: str, sub: str, body: JSON
    ) -> JSON:
        return await self.request("POST", path(api_version, plural, namespace, name) + f"/{sub}", body=body)

    async def delete(
        self,
        api_version: str,
        plural: str,
        namespace: str | None,
        name: str,
        *,
        grace_seconds: int | None = None,
        uid: str | None = None,
    ) -> bool:
        body: JSON = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        if uid is not None:
            body["preconditions"] = {"uid": uid}
        try:
            await self.request("DELETE", path(api_version, plural, namespace, name), body=body)
            return True
        except ApiError as e:
            if e.status in (404, 409):  # gone, or another object of that name by now
                return False
            raise

    async def watch_forever(
        self, api_version: str, plural: str, namespace: str | None, trigger: asyncio.Event
    ) -> None:
        """Set `trigger` on every event (the runner re-reads the state itself); reconnect on errors."""
        url = self.server + path(api_version, plural, namespace)
        while True:
            try:
                async with self.session.get(
                    url,
                    params={"watch": "true", "timeoutSeconds": "300"},
                    headers=self._headers,
                    timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
                ) as resp:
                    if resp.status >= 400:
                        raise ApiError(resp.status, await resp.text())
                    async for _line in resp.content:
                        trigger.set()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.debug("watch %s: %s", plural, e)
                await asyncio.sleep(0.5)
