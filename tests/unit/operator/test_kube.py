"""kube.Kube against a small in-process HTTP server speaking the Kubernetes REST conventions."""

from __future__ import annotations

import asyncio
import copy
import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from brook_operator import kube as kube_mod
from brook_operator.kube import ApiError, Connection, Kube, PermissionNotGranted


class ApiServer:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, dict[str, str], str | None]] = []
        self.rv = 0

    async def handle(self, request: web.Request) -> web.Response:
        path = request.path
        self.requests.append(
            (request.method, path, dict(request.query), request.headers.get("Authorization"))
        )
        body = await request.json() if request.can_read_body else None

        def status(code: int, reason: str) -> web.Response:
            return web.json_response(
                {"kind": "Status", "reason": reason, "message": f"{reason} {path}"}, status=code
            )

        if request.method == "GET" and path in self.objects:
            return web.json_response(self.objects[path])
        if request.method == "GET":
            prefix = path + "/"
            want = dict(p.split("=", 1) for p in request.query.get("labelSelector", "").split(",") if p)
            items = [
                o
                for p, o in sorted(self.objects.items())
                if p.startswith(prefix)
                and "/" not in p[len(prefix) :]
                and all((o["metadata"].get("labels") or {}).get(k) == v for k, v in want.items())
            ]
            if items or path.endswith("s"):
                return web.json_response({"items": items})
            return status(404, "NotFound")
        if request.method == "POST":
            assert body is not None
            target = f"{path}/{body['metadata']['name']}"
            if target in self.objects:
                return status(409, "AlreadyExists")
            self.rv += 1
            body["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[target] = body
            return web.json_response(body, status=201)
        if request.method == "PUT":
            assert body is not None
            live = self.objects.get(path)
            if live is None:
                return status(404, "NotFound")
            if body["metadata"].get("resourceVersion") != live["metadata"]["resourceVersion"]:
                return status(409, "Conflict")
            self.rv += 1
            body["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[path] = body
            return web.json_response(body)
        if request.method == "DELETE":
            if self.objects.pop(path, None) is None:
                return status(404, "NotFound")
            return web.json_response({"kind": "Status", "status": "Success"})
        return status(405, "MethodNotAllowed")


def with_server(scenario: Callable[[ApiServer, Kube], Awaitable[None]], permissions: Any = None) -> ApiServer:
    server = ApiServer()

    async def main() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", server.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        site = web.SockSite(runner, sock)
        await site.start()
        k = Kube(
            Connection(f"http://127.0.0.1:{port}", "Bearer secret", None),
            permissions if permissions is not None else kube_mod.OPERATOR_PERMISSIONS,
        )
        try:
            await scenario(server, k)
        finally:
            await k.close()
            await runner.cleanup()

    asyncio.run(main())
    return server


CM = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "demo-config", "namespace": "kafka", "labels": {"app": "brook"}},
    "data": {"A": "1"},
}


def test_paths() -> None:
    assert kube_mod.KINDS["StatefulSet"].path("ns", "x") == "/apis/apps/v1/namespaces/ns/statefulsets/x"
    assert kube_mod.KINDS["ConfigMap"].path("ns") == "/api/v1/namespaces/ns/configmaps"
    assert kube_mod.KINDS["Node"].path(None, "n1") == "/api/v1/nodes/n1"
    assert (
        kube_mod.KINDS["ClusterRoleBinding"].path(None, "b")
        == "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/b"
    )
    with pytest.raises(ValueError, match="namespaced"):
        kube_mod.KINDS["Pod"].path(None)


def test_apply_creates_skips_and_replaces() -> None:
    async def scenario(api: ApiServer, k: Kube) -> None:
        assert await k.apply(CM) == "created"
        assert await k.apply(CM) == "unchanged"
        changed = copy.deepcopy(CM)
        changed["data"] = {"A": "2"}
        assert await k.apply(changed) == "updated"
        live = await k.get("ConfigMap", "kafka", "demo-config")
        assert live is not None and live["data"] == {"A": "2"}
        assert live["metadata"]["resourceVersion"] == "2"

    api = with_server(scenario)
    methods = [(m, p) for m, p, _, _ in api.requests]
    assert methods == [
        ("GET", "/api/v1/namespaces/kafka/configmaps/demo-config"),
        ("POST", "/api/v1/namespaces/kafka/configmaps"),
        ("GET", "/api/v1/namespaces/kafka/configmaps/demo-config"),
        ("GET", "/api/v1/namespaces/kafka/configmaps/demo-config"),
        ("PUT", "/api/v1/namespaces/kafka/configmaps/demo-config"),
        ("GET", "/api/v1/namespaces/kafka/configmaps/demo-config"),
    ]
    assert {auth for *_, auth in api.requests} == {"Bearer secret"}


def test_get_missing_list_delete() -> None:
    async def scenario(api: ApiServer, k: Kube) -> None:
        assert await k.get("StatefulSet", "kafka", "nope") is None
        for i, labels in enumerate([{"app": "brook"}, {"app": "other"}]):
            api.objects[f"/api/v1/namespaces/kafka/pods/p{i}"] = {
                "metadata": {"name": f"p{i}", "labels": labels}
            }
        pods = await k.list("Pod", "kafka", "app=brook")
        assert [p["metadata"]["name"] for p in pods] == ["p0"]
        assert await k.delete("Pod", "kafka", "p0") is True
        assert await k.delete("Pod", "kafka", "p0") is False

    api = with_server(scenario)
    assert (
        "GET",
        "/api/v1/namespaces/kafka/pods",
        {"labelSelector": "app=brook"},
        "Bearer secret",
    ) in api.requests
    deletes = [r for r in api.requests if r[0] == "DELETE"]
    assert deletes[0][2] == {"propagationPolicy": "Background"}


def test_errors_carry_the_status() -> None:
    async def scenario(api: ApiServer, k: Kube) -> None:
        await k.create(CM)
        with pytest.raises(ApiError) as e:
            await k.create(CM)
        assert e.value.status == 409 and e.value.reason == "AlreadyExists"
        stale = copy.deepcopy(CM)
        stale["metadata"]["resourceVersion"] = "0"
        with pytest.raises(ApiError) as e:
            await k.replace(stale)
        assert e.value.status == 409

    with_server(scenario)


def test_unreachable_api_is_an_api_error() -> None:
    async def scenario() -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        k = Kube(Connection(f"http://127.0.0.1:{port}", None, None))
        try:
            with pytest.raises(ApiError) as e:
                await k.get("StatefulSet", "ns", "x")
            assert e.value.status == 0
        finally:
            await k.close()

    asyncio.run(scenario())


def test_requests_outside_the_declared_permissions_are_refused() -> None:
    async def scenario(api: ApiServer, k: Kube) -> None:
        with pytest.raises(PermissionNotGranted):
            await k.list("ConfigMap", "kafka")  # the operator only gets configmaps by name
        with pytest.raises(PermissionNotGranted):
            await k.get("Node", None, "n1")

    api = with_server(scenario)
    assert api.requests == []


def test_rack_init_may_only_get_nodes() -> None:
    async def scenario(api: ApiServer, k: Kube) -> None:
        api.objects["/api/v1/nodes/n1"] = {"metadata": {"name": "n1", "labels": {"zone": "a"}}}
        assert (await k.get("Node", None, "n1") or {})["metadata"]["labels"] == {"zone": "a"}
        with pytest.raises(PermissionNotGranted):
            await k.get("StatefulSet", "ns", "x")

    with_server(scenario, kube_mod.RACK_INIT_PERMISSIONS)


def test_a_rotated_token_is_reloaded_once_on_401() -> None:
    calls: list[str] = []

    async def main() -> None:
        async def handle(request: web.Request) -> web.Response:
            calls.append(request.headers.get("Authorization", ""))
            if request.headers.get("Authorization") != "Bearer new":
                return web.json_response({"reason": "Unauthorized"}, status=401)
            return web.json_response({"metadata": {"name": "x"}})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        host = f"http://127.0.0.1:{sock.getsockname()[1]}"
        await web.SockSite(runner, sock).start()
        k = Kube(Connection(host, "Bearer old", None), refresh=lambda: Connection(host, "Bearer new", None))
        try:
            assert await k.get("StatefulSet", "ns", "x") == {"metadata": {"name": "x"}}
        finally:
            await k.close()
            await runner.cleanup()

    asyncio.run(main())
    assert calls == ["Bearer old", "Bearer new"]


def test_connection_from_a_kubeconfig(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"token": "tok"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(cfg))
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    conn = kube_mod.load_connection()
    assert conn.host == "http://127.0.0.1:6443"
    assert conn.token == "Bearer tok"
