"""The one module that calls the Kubernetes API besides kopf itself.

Credentials and the server address come from the kubernetes client's config loaders (in-cluster
service account, else KUBECONFIG / ~/.kube/config); requests are plain JSON over aiohttp, so the
operator never blocks its event loop and depends on no generated API classes.

Every request names the (API group, resource, verb) it needs, and a Kube instance refuses anything
outside its permission set. OPERATOR_PERMISSIONS and RACK_INIT_PERMISSIONS are therefore exactly what
the RBAC in manifests/ and charts/brook must grant (a test compares them).
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import aiohttp

from .apply import check_ownership, prepare_replace, unchanged, with_applied_hash

log = logging.getLogger(__name__)

Permission = tuple[str, str, str]  # (API group, resource, verb)


@dataclass(frozen=True, slots=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/api/{self.api_version}" if not self.group else f"/apis/{self.api_version}"
        if self.namespaced:
            if not namespace:
                raise ValueError(f"{self.kind} is namespaced: a namespace is required")
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        return f"{base}/{quote(name, safe='')}" if name else base


KINDS: dict[str, Kind] = {
    k.kind: k
    for k in (
        Kind("v1", "ConfigMap", "configmaps"),
        Kind("v1", "Secret", "secrets"),
        Kind("brook.dev/v1alpha1", "Cluster", "clusters"),
        Kind("cert-manager.io/v1", "Certificate", "certificates"),
        Kind("v1", "ServiceAccount", "serviceaccounts"),
        Kind("v1", "Service", "services"),
        Kind("v1", "Pod", "pods"),
        Kind("v1", "Node", "nodes", namespaced=False),
        Kind("apps/v1", "StatefulSet", "statefulsets"),
        Kind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets"),
        Kind("coordination.k8s.io/v1", "Lease", "leases"),
        Kind("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False),
    )
}


def _perms(group: str, resource: str, *verbs: str) -> set[Permission]:
    return {(group, resource, v) for v in verbs}


# What the operator's reconcile flow calls through this module.
OPERATOR_PERMISSIONS: frozenset[Permission] = frozenset(
    _perms("", "configmaps", "get", "create", "update")
    | _perms("", "secrets", "get", "create", "update", "delete")
    | _perms("brook.dev", "clusters", "get")  # a User's Cluster
    | _perms("cert-manager.io", "certificates", "get", "create", "update", "delete")
    | _perms("", "serviceaccounts", "get", "create", "update")
    | _perms("", "services", "get", "list", "create", "update", "delete")  # list: external addresses
    | _perms("", "pods", "list", "delete")
    | _perms("apps", "statefulsets", "get", "create", "update", "delete")
    | _perms("policy", "poddisruptionbudgets", "get", "create", "update", "delete")
    | _perms("coordination.k8s.io", "leases", "get", "create", "update")
    | _perms("rbac.authorization.k8s.io", "clusterrolebindings", "get", "create", "update", "delete")
)

# What kopf itself calls for the operator (from its recorded traffic; see the kubernetes notes), plus
# the two permissions the API server checks on writes the operator makes: setting blockOwnerDeletion
# in ownerReferences (update on clusters/finalizers) and binding the rack ClusterRole (bind).
KOPF_PERMISSIONS: frozenset[Permission] = frozenset(
    _perms("brook.dev", "clusters", "list", "watch", "patch")
    | _perms("brook.dev", "topics", "list", "watch", "patch")
    | _perms("brook.dev", "users", "list", "watch", "patch")
    | _perms("brook.dev", "clusters/status", "patch")
    | _perms("brook.dev", "topics/status", "patch")
    | _perms("brook.dev", "users/status", "patch")
    | _perms("apiextensions.k8s.io", "customresourcedefinitions", "list", "watch")
    | _perms("", "events", "create")
    # With --namespace kopf lists and watches the namespaces (a real API server refused it: 403 retries).
    | _perms("", "namespaces", "list", "watch")
)
API_SERVER_CHECKED: frozenset[Permission] = frozenset(
    _perms("brook.dev", "clusters/finalizers", "update")
    | _perms("brook.dev", "users/finalizers", "update")
    | _perms("rbac.authorization.k8s.io", "clusterroles", "bind")
)

# What the brokers' rack init container calls.
RACK_INIT_PERMISSIONS: frozenset[Permission] = frozenset(_perms("", "nodes", "get"))


class ApiError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class PermissionNotGranted(RuntimeError):
    """A code path asked for a request outside its declared permission set (a bug, not a 403)."""


@dataclass(frozen=True, slots=True)
class Connection:
    host: str
    token: str | None
    ssl_context: ssl.SSLContext | Literal[False] | None


def load_connection() -> Connection:
    """In-cluster service account first, else the kubeconfig (KUBECONFIG or ~/.kube/config)."""
    from kubernetes import client, config  # the client's config loaders only

    in_cluster: Callable[..., None] = config.load_incluster_config
    kubeconfig: Callable[..., None] = config.load_kube_config
    cfg = client.Configuration()
    try:
        in_cluster(client_configuration=cfg)
    except config.ConfigException:
        # KUBECONFIG read now (the client reads it once, at import)
        kubeconfig(config_file=os.environ.get("KUBECONFIG") or None, client_configuration=cfg)
    return _connection_from(cfg)


def _connection_from(cfg: Any) -> Connection:
    host = str(cfg.host).rstrip("/")
    token = cfg.get_api_key_with_prefix("authorization") or cfg.get_api_key_with_prefix("BearerToken")
    ctx: ssl.SSLContext | Literal[False] | None = None
    if host.startswith("https://"):
        if not cfg.verify_ssl:
            ctx = False
        else:
            ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
            if cfg.cert_file:
                ctx.load_cert_chain(cfg.cert_file, cfg.key_file or None)
    if token and not str(token).lower().startswith("bearer "):
        token = f"Bearer {token}"
    return Connection(host, str(token) if token else None, ctx)


class Kube:
    """Typed-dict access to the few kinds the operator manages."""

    def __init__(
        self,
        connection: Connection,
        permissions: frozenset[Permission] = OPERATOR_PERMISSIONS,
        *,
        refresh: Any = None,
        timeout: float = 30.0,
    ) -> None:
        self._conn = connection
        self._permissions = permissions
        self._refresh = refresh  # a callable returning a fresh Connection (rotated tokens), or None
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_environment(cls, permissions: frozenset[Permission] = OPERATOR_PERMISSIONS) -> Kube:
        return cls(load_connection(), permissions, refresh=load_connection)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _check(self, kind: Kind, verb: str) -> None:
        if (kind.group, kind.plural, verb) not in self._permissions:
            raise PermissionNotGranted(
                f"{verb} {kind.plural}.{kind.group or 'core'} is not a declared permission"
            )

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        try:
            return await self._send(method, path, body=body, params=params)
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ApiError(0, "Unreachable", f"{method} {path}: {e or type(e).__name__}") from e

    async def _send(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None,
        params: Mapping[str, str] | None,
    ) -> dict[str, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        for attempt in (1, 2):
            headers = {"Accept": "application/json"}
            if self._conn.token:
                headers["Authorization"] = self._conn.token
            async with self._session.request(
                method,
                self._conn.host + path,
                json=body,
                params=params,
                headers=headers,
                ssl=self._conn.ssl_context if self._conn.ssl_context is not None else True,
            ) as resp:
                if resp.status == 401 and attempt == 1 and self._refresh is not None:
                    self._conn = self._refresh()  # a rotated service-account token
                    continue
                try:
                    data = await resp.json(content_type=None)
                except ValueError:
                    data = None
                if resp.status >= 400:
                    d = data if isinstance(data, dict) else {}
                    raise ApiError(resp.status, str(d.get("reason", resp.reason)), str(d.get("message", "")))
                return data if isinstance(data, dict) else {}
        raise ApiError(401, "Unauthorized", "credentials refused twice")

    async def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        k = KINDS[kind]
        self._check(k, "get")
        try:
            return await self._request("GET", k.path(namespace, name))
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    async def list(
        self, kind: str, namespace: str | None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        k = KINDS[kind]
        self._check(k, "list")
        params = {"labelSelector": label_selector} if label_selector else None
        data = await self._request("GET", k.path(namespace), params=params)
        items = data.get("items") or []
        return [i for i in items if isinstance(i, dict)]

    async def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        k = KINDS[str(body["kind"])]
        self._check(k, "create")
        return await self._request("POST", k.path((body.get("metadata") or {}).get("namespace")), body=body)

    async def replace(self, body: Mapping[str, Any]) -> dict[str, Any]:
        k = KINDS[str(body["kind"])]
        self._check(k, "update")
        meta = body.get("metadata") or {}
        return await self._request("PUT", k.path(meta.get("namespace"), meta["name"]), body=body)

    async def delete(self, kind: str, namespace: str | None, name: str) -> bool:
        """Delete (background propagation); False when it did not exist."""
        k = KINDS[kind]
        self._check(k, "delete")
        try:
            await self._request("DELETE", k.path(namespace, name), params={"propagationPolicy": "Background"})
            return True
        except ApiError as e:
            if e.status == 404:
                return False
            raise

    async def apply(self, manifest: Mapping[str, Any]) -> Literal["created", "updated", "unchanged"]:
        """Create, or replace when the built manifest changed since the last write (hash annotation)."""
        desired, h = with_applied_hash(dict(manifest))
        meta = desired["metadata"]
        live = await self.get(str(desired["kind"]), meta.get("namespace"), meta["name"])
        if live is None:
            try:
                await self.create(desired)
                return "created"
            except ApiError as e:
                if e.status != 409:
                    raise
                live = await self.get(str(desired["kind"]), meta.get("namespace"), meta["name"])
                if live is None:
                    raise
        if unchanged(live, h):
            return "unchanged"
        check_ownership(live, desired)
        await self.replace(prepare_replace(live, desired))
        return "updated"
