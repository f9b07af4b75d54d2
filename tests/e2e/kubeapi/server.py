"""The HTTP face of the emulator (aiohttp): routing, content negotiation, lists, watches, and the
loop that runs the deletion controllers (namespace/CRD cleanup, garbage collection)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import random
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from . import discovery, protobuf, tables
from .errors import ApiError
from .registry import Ctx, Registry
from .resources import BUILTINS, REVIEWS, Catalog, ResourceType
from .storage import Event, Expired, Store

log = logging.getLogger("kubeapi")

JSON = dict[str, Any]
SERVER_VERSION = (1, 35, 0)
RETURN_DELETED = {"Pod", "ServiceAccount", "StorageClass", "Namespace", "PersistentVolume"}


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _json(
    obj: Any, status: int = 200, ctype: str = "application/json", warnings: list[str] | None = None
) -> web.Response:
    headers = {"Content-Type": ctype}
    if warnings:
        headers["Warning"] = ", ".join('299 - "' + w.replace('"', '\\"') + '"' for w in warnings)
    return web.Response(body=_dumps(obj), status=status, headers=headers)


class Accept:
    """What the client will take: JSON, a Table, partial metadata, or aggregated discovery."""

    def __init__(self, header: str) -> None:
        self.choices: list[tuple[str, dict[str, str]]] = []
        for part in (header or "*/*").split(","):
            bits = [b.strip() for b in part.split(";")]
            params = {}
            for b in bits[1:]:
                if "=" in b:
                    k, v = b.split("=", 1)
                    params[k.strip()] = v.strip()
            self.choices.append((bits[0].lower(), params))

    def pick(self, *, discovery_doc: bool = False) -> str:
        """One of: json, table, partial, partiallist, aggregated, aggregated-beta; '' when none fits."""
        for mt, params in self.choices:
            if mt not in ("application/json", "*/*", "application/*"):
                continue
            as_ = params.get("as", "")
            if not as_:
                return "json"
            if as_ == "Table":
                return "table"
            if as_ in ("PartialObjectMetadata", "PartialObjectMetadataList"):
                return "partial"
            if as_ == "APIGroupDiscoveryList" and discovery_doc:
                return "aggregated-beta" if params.get("v") == "v2beta1" else "aggregated"
        return ""


class KubeApiServer:
    """An in-process Kubernetes API server emulator. `await start()`, use `.url`, `await stop()`."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        bookmark_interval: float = 5.0,
        history: int = 10_000,
        aggregated_discovery: bool = True,
    ) -> None:
        self.host = host
        self.port = port
        self.bookmark_interval = bookmark_interval
        self.aggregated_discovery = aggregated_discovery
        self.store = Store(history=history)
        self.catalog = Catalog()
        for rt in BUILTINS + REVIEWS:
            self.catalog.add(rt)
        self.registry = Registry(self.store, self.catalog)
        self._wake = asyncio.Event()
        self.registry.wake_controllers = self._wake.set
        self.registry.bootstrap()
        self._runner: web.AppRunner | None = None
        self._controllers: asyncio.Task[None] | None = None
        self._stopping = False
        self.requests: list[tuple[str, str]] = []  # (method, path_qs), for debugging tests

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def version(self) -> str:
        return "v{}.{}.{}".format(*SERVER_VERSION)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        self._controllers = asyncio.create_task(self._run_controllers())

    async def stop(self) -> None:
        self._stopping = True
        self.store.close_all_watches()
        if self._controllers:
            self._controllers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._controllers
        if self._runner:
            await self._runner.cleanup()

    async def _run_controllers(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(0.02)  # let a burst of writes settle, as the real controllers lag a little
            try:
                for _ in range(100):
                    if not self.registry.reconcile():
                        break
            except Exception:
                log.exception("controller pass failed")

    # ------------------------------------------------------------ routing

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.path_qs))
        if len(self.requests) > 5000:
            del self.requests[:1000]
        try:
            return await self._route(request)
        except ApiError as e:
            if e.code >= 500:
                log.warning("%s %s -> %s %s", request.method, request.path_qs, e.code, e.message)
            return _json(e.status(), e.code)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as e:
            log.exception("%s %s failed", request.method, request.path_qs)
            return _json(ApiError(500, f"Internal error occurred: {e}", reason="InternalError").status(), 500)

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        method = request.method
        if path in ("/healthz", "/readyz", "/livez") or path.startswith(("/healthz/", "/readyz/", "/livez/")):
            return web.Response(text="ok")
        if path == "/version":
            major, minor, _ = SERVER_VERSION
            return _json(
                {
                    "major": str(major),
                    "minor": str(minor),
                    "gitVersion": self.version,
                    "gitCommit": "0000000000000000000000000000000000000000",
                    "gitTreeState": "clean",
                    "buildDate": "2025-01-01T00:00:00Z",
                    "goVersion": "go1.23",
                    "compiler": "gc",
                    "platform": "linux/amd64",
                    "emulationMajor": str(major),
                    "emulationMinor": str(minor),
                }
            )
        if path == "/openapi/v3":
            return _json(discovery.openapi_v3_index(self.catalog, self.version))
        if path.startswith("/openapi/v3/"):
            rest = path[len("/openapi/v3/") :].split("/")
            if rest[0] == "api" and len(rest) == 2:
                doc = discovery.openapi_v3_gv(self.catalog, "", rest[1], self.version)
            elif rest[0] == "apis" and len(rest) == 3:
                doc = discovery.openapi_v3_gv(self.catalog, rest[1], rest[2], self.version)
            else:
                doc = None
            if doc is None:
                raise ApiError(404, "the server could not find the requested resource")
            return _json(doc)
        if path == "/api" or path == "/apis":
            accept = Accept(request.headers.get("Accept", ""))
            choice = accept.pick(discovery_doc=True)
            if choice.startswith("aggregated") and self.aggregated_discovery:
                beta = choice == "aggregated-beta"
                doc = discovery.aggregated(self.catalog, core=path == "/api", v2beta1=beta)
                return _json(doc, ctype=discovery.AGG_V2BETA1 if beta else discovery.AGG_V2)
            if path == "/api":
                return _json(discovery.api_versions(f"{self.host}:{self.port}"))
            return _json(discovery.api_group_list(self.catalog))
        parts = [unquote(p) for p in path.split("/")[1:]]
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) == 2:
            doc = discovery.api_group(self.catalog, parts[1])
            if doc is None:
                raise ApiError(404, "the server could not find the requested resource")
            return _json(doc)
        elif parts[0] == "apis" and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "the server could not find the requested resource")
        if not rest:
            doc = discovery.api_resource_list(self.catalog, group, version)
            if doc is None:
                raise ApiError(404, "the server could not find the requested resource")
            return _json(doc)
        watch_prefix = False
        if rest[0] == "watch":
            watch_prefix, rest = True, rest[1:]
        ns: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            ns, rest = rest[1], rest[2:]
        plural = rest[0]
        rt = self.catalog.get(group, version, plural)
        if rt is None:
            raise ApiError(404, "the server could not find the requested resource")
        if ns is not None and not rt.namespaced:
            raise ApiError(404, "the server could not find the requested resource")
        name = rest[1] if len(rest) >= 2 else ""
        sub = rest[2] if len(rest) >= 3 else ""
        if len(rest) > 3 or (sub and sub not in rt.subresources):
            raise ApiError(404, "the server could not find the requested resource")
        if not name and rt.namespaced and ns is None and method not in ("GET",):
            raise ApiError(
                404 if method != "POST" else 405,
                "the server does not allow this method on the requested resource",
            )
        q: Any = request.query
        if watch_prefix or (method == "GET" and not name and q.get("watch") in ("true", "1")):
            if name:
                q = dict(
                    q,
                    fieldSelector=",".join(
                        filter(None, [q.get("fieldSelector", ""), f"metadata.name={name}"])
                    ),
                )
            return await self._watch(request, rt, ns, q)
        ctx = Ctx(
            dry_run="All" in q.getall("dryRun", []),
            field_validation=q.get("fieldValidation", "Warn") or "Warn",
            field_manager=q.get("fieldManager", ""),
            force=q.get("force") == "true",
        )
        if rt.verbs == ("create",):
            if method != "POST" or name:
                raise ApiError(405, "the server does not allow this method on the requested resource")
            try:
                review = await self._body(request)
            except ApiError:
                review = {}  # e.g. kubectl auth can-i's protobuf body: the answer does not depend on it
            return self._review(rt, review)
        ns_ = ns or ""
        if not name:
            if method == "GET":
                return self._list(request, rt, ns, q)
            if method == "POST":
                return _json(
                    self.registry.present(rt, self.registry.create(rt, ns_, await self._body(request), ctx)),
                    201,
                    warnings=ctx.warnings,
                )
            if method == "DELETE":
                return await self._delete_collection(request, rt, ns, q, ctx)
            raise ApiError(405, "the server does not allow this method on the requested resource")
        if sub in ("binding", "eviction"):
            if method != "POST":
                raise ApiError(405, "the server does not allow this method on the requested resource")
            return self._pod_action(rt, ns_, name, sub, await self._body(request), ctx)
        if method == "GET":
            obj = self.registry.get(rt, ns_, name)
            if sub == "scale":
                return _json(self.registry.scale_of(rt, obj))
            return self._respond_one(request, rt, obj)
        if method == "PUT":
            body = await self._body(request)
            result = self.registry.update(rt, ns_, name, body, ctx, sub)
            if sub == "scale":
                return _json(result, warnings=ctx.warnings)
            return _json(self.registry.present(rt, result), warnings=ctx.warnings)
        if method == "PATCH":
            raw = await request.read()
            result, created = self.registry.patch(
                rt, ns_, name, raw, request.headers.get("Content-Type", ""), ctx, sub
            )
            if sub == "scale":
                return _json(result, warnings=ctx.warnings)
            return _json(self.registry.present(rt, result), 201 if created else 200, warnings=ctx.warnings)
        if method == "DELETE" and not sub:
            options = dict(await self._body(request, optional=True) or {})
            for k in ("propagationPolicy", "gracePeriodSeconds", "orphanDependents"):
                if k in q and k not in options:
                    v: Any = q[k]
                    if k == "gracePeriodSeconds":
                        v = int(v)
                    elif k == "orphanDependents":
                        v = v == "true"
                    options[k] = v
            if options.get("dryRun") == ["All"]:
                ctx.dry_run = True
            obj, gone = self.registry.delete(rt, ns_, name, options, ctx)
            if gone and rt.kind not in RETURN_DELETED:
                return _json(self.registry.status_success(rt, obj))
            return _json(self.registry.present(rt, obj))
        raise ApiError(405, "the server does not allow this method on the requested resource")

    # ------------------------------------------------------------ helpers

    @staticmethod
    async def _body(request: web.Request, optional: bool = False) -> Any:
        raw = await request.read()
        if not raw.strip():
            if optional:
                return None
            raise ApiError(
                400,
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json, application/yaml",
            )
        ctype = request.headers.get("Content-Type", "application/json").split(";")[0].strip().lower()
        if ctype == "application/vnd.kubernetes.protobuf":
            try:
                return protobuf.decode(raw)
            except protobuf.ProtobufError as e:
                raise ApiError(
                    415,
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: application/json, application/yaml ({e})",
                ) from None
        if "protobuf" in ctype or "cbor" in ctype:
            raise ApiError(
                415,
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json, application/yaml",
            )
        try:
            return json.loads(raw)
        except ValueError:
            if ctype in ("application/yaml", "application/x-yaml", "text/yaml"):
                import yaml

                return yaml.safe_load(raw)
            raise ApiError(400, "the body of the request was in an unknown format") from None

    def _accept(self, request: web.Request) -> str:
        choice = Accept(request.headers.get("Accept", "")).pick()
        if not choice:
            raise ApiError(
                406,
                "only the following media types are accepted: application/json, "
                "application/yaml, application/vnd.kubernetes.protobuf",
            )
        return choice

    def _respond_one(self, request: web.Request, rt: ResourceType, obj: JSON) -> web.Response:
        choice = self._accept(request)
        obj = self.registry.present(rt, obj)
        if choice == "table":
            include = request.query.get("includeObject", "Metadata")
            return _json(tables.table(rt, [obj], include, obj["metadata"].get("resourceVersion", "")))
        if choice == "partial":
            return _json(tables.partial(obj))
        return _json(obj)

    def _list(self, request: web.Request, rt: ResourceType, ns: str | None, q: Any) -> web.Response:
        choice = self._accept(request)
        items = self.registry.select(rt, ns, q.get("labelSelector", ""), q.get("fieldSelector", ""))
        rv = str(self.store.rv)
        meta: JSON = {"resourceVersion": rv}
        cont = q.get("continue", "")
        if cont:
            try:
                token = json.loads(base64.urlsafe_b64decode(cont.encode()))
                start = tuple(token["start"])
                meta["resourceVersion"] = rv = str(token["rv"])
            except (ValueError, KeyError, TypeError):
                raise ApiError(
                    400, "continue key is not valid: incorrect encoded start resourceVersion"
                ) from None
            items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start]
        limit = int(q.get("limit", "0") or 0)
        if limit > 0 and len(items) > limit:
            last = items[limit - 1]["metadata"]
            token = {"rv": int(rv), "start": [last.get("namespace", ""), last["name"]]}
            meta["continue"] = base64.urlsafe_b64encode(_dumps(token)).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        items = [self.registry.present(rt, o) for o in items]
        if choice == "table":
            out = tables.table(rt, items, q.get("includeObject", "Metadata"), rv)
            out["metadata"].update({k: v for k, v in meta.items() if k != "resourceVersion"})
            return _json(out)
        if choice == "partial":
            return _json(
                {
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta,
                    "items": [tables.partial(o) for o in items],
                }
            )
        return _json(
            {"kind": rt.list_kind_name, "apiVersion": rt.group_version, "metadata": meta, "items": items}
        )

    async def _delete_collection(
        self, request: web.Request, rt: ResourceType, ns: str | None, q: Any, ctx: Ctx
    ) -> web.Response:
        options = dict(await self._body(request, optional=True) or {})
        if "propagationPolicy" in q:
            options.setdefault("propagationPolicy", q["propagationPolicy"])
        deleted = []
        for obj in self.registry.select(rt, ns, q.get("labelSelector", ""), q.get("fieldSelector", "")):
            m = obj["metadata"]
            with contextlib.suppress(ApiError):
                final, _ = self.registry.delete(rt, m.get("namespace", ""), m["name"], options, ctx)
                deleted.append(self.registry.present(rt, final))
        return _json(
            {
                "kind": rt.list_kind_name,
                "apiVersion": rt.group_version,
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": deleted,
            }
        )

    def _review(self, rt: ResourceType, body: Any) -> web.Response:
        out = dict(body) if isinstance(body, dict) else {}
        out.update(apiVersion=rt.group_version, kind=rt.kind)
        out.setdefault("metadata", {})
        if rt.kind == "SelfSubjectReview":
            out["status"] = {
                "userInfo": {
                    "username": "kubernetes-admin",
                    "groups": ["system:masters", "system:authenticated"],
                }
            }
        else:
            out["status"] = {"allowed": True, "reason": "the emulator authorizes everything"}
        return _json(out, 201)

    def _pod_action(
        self, rt: ResourceType, ns: str, name: str, sub: str, body: Any, ctx: Ctx
    ) -> web.Response:
        pod = self.registry.get(rt, ns, name)
        if sub == "binding":
            target = (body or {}).get("target") or {}
            if (pod.get("spec") or {}).get("nodeName"):
                raise ApiError(
                    409,
                    f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is '
                    f'already assigned to node "{pod["spec"]["nodeName"]}"',
                    reason="Conflict",
                    name=name,
                    kind="pods/binding",
                )
            patch = json.dumps({"spec": {"nodeName": target.get("name", "")}}).encode()
            self.registry.patch(rt, ns, name, patch, "application/merge-patch+json", ctx)
        else:
            self.registry.delete(rt, ns, name, (body or {}).get("deleteOptions") or {}, ctx)
        return _json(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201
        )

    # ------------------------------------------------------------ watch

    async def _watch(
        self, request: web.Request, rt: ResourceType, ns: str | None, q: Any
    ) -> web.StreamResponse:
        from .meta import fields_match, labels_match, parse_field_selector, parse_label_selector

        choice = self._accept(request)
        include = q.get("includeObject", "Metadata")
        lreqs = parse_label_selector(q.get("labelSelector", ""))
        freqs = parse_field_selector(q.get("fieldSelector", ""))
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        send_initial = q.get("sendInitialEvents") == "true"
        rv_text = q.get("resourceVersion", "")
        try:
            timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else random.uniform(1800, 3600)
        except ValueError:
            raise ApiError(400, "invalid timeoutSeconds") from None
        if send_initial and q.get("resourceVersionMatch") != "NotOlderThan":
            raise ApiError(
                422,
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
                "resourceVersionMatch to NotOlderThan",
                reason="Invalid",
            )
        since: int | None
        if rv_text in ("", "0") or send_initial:
            since = None
        else:
            try:
                since = int(rv_text)
            except ValueError:
                raise ApiError(400, f"invalid resource version: {rv_text}") from None

        def matches(obj: JSON | None) -> bool:
            if obj is None:
                return False
            if ns is not None and obj["metadata"].get("namespace") != ns:
                return False
            return labels_match(lreqs, obj["metadata"].get("labels")) and fields_match(freqs, obj)

        def render(obj: JSON) -> JSON:
            obj = self.registry.present(rt, obj)
            if choice == "table":
                return tables.table(rt, [obj], include, obj["metadata"].get("resourceVersion", ""))
            if choice == "partial":
                return tables.partial(obj)
            return obj

        def translate(ev: Event) -> tuple[str, JSON] | None:
            new_ok = matches(ev.obj)
            old_ok = matches(ev.old)
            if ev.type == "ADDED":
                return ("ADDED", ev.obj) if new_ok else None
            if ev.type == "DELETED":
                return ("DELETED", ev.obj) if (old_ok or new_ok) else None
            if new_ok and old_ok:
                return ("MODIFIED", ev.obj)
            if new_ok:
                return ("ADDED", ev.obj)
            if old_ok:
                return ("DELETED", ev.obj)
            return None

        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"}
        )
        try:
            watcher, replay = self.store.subscribe(rt.key, since)
        except Expired as e:
            await resp.prepare(request)
            err = ApiError(410, str(e), reason="Expired").status()
            await resp.write(_dumps({"type": "ERROR", "object": err}) + b"\n")
            await resp.write_eof()
            return resp
        initial = [] if since is not None else [o for o in self.store.items(rt.key, ns) if matches(o)]
        start_rv = self.store.rv
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            await resp.prepare(request)
            for obj in initial:
                await resp.write(_dumps({"type": "ADDED", "object": render(obj)}) + b"\n")
            if send_initial and bookmarks:
                await resp.write(
                    _dumps({"type": "BOOKMARK", "object": self._bookmark(rt, start_rv, True)}) + b"\n"
                )
            for ev in replay:
                t = translate(ev)
                if t:
                    await resp.write(_dumps({"type": t[0], "object": render(t[1])}) + b"\n")
            next_bookmark = loop.time() + self.bookmark_interval
            while not self._stopping:
                now = loop.time()
                if now >= deadline:
                    break
                wait = min(deadline, next_bookmark if bookmarks else deadline, now + 1.0) - now
                try:
                    ev_or_none = await asyncio.wait_for(watcher.queue.get(), timeout=max(wait, 0.001))
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break
                    if bookmarks and loop.time() >= next_bookmark:
                        await resp.write(
                            _dumps({"type": "BOOKMARK", "object": self._bookmark(rt, self.store.rv)}) + b"\n"
                        )
                        next_bookmark = loop.time() + self.bookmark_interval
                    continue
                if ev_or_none is None:
                    break
                t = translate(ev_or_none)
                if t:
                    await resp.write(_dumps({"type": t[0], "object": render(t[1])}) + b"\n")
            with contextlib.suppress(ConnectionResetError, RuntimeError):
                await resp.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            self.store.unsubscribe(watcher)
        return resp

    @staticmethod
    def _bookmark(rt: ResourceType, rv: int, initial_end: bool = False) -> JSON:
        meta: JSON = {"resourceVersion": str(rv), "creationTimestamp": None}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"kind": rt.kind, "apiVersion": rt.group_version, "metadata": meta}
