"""The REST API of Confluent's Schema Registry over aiohttp: the same paths, status codes and error bodies
({"error_code", "message"}), answered as application/vnd.schemaregistry.v1+json. Every failure is a JSON
error body: a bad request never gets a traceback, an unexpected error a one-line 500 (logged here)."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from . import errors
from .access import ANONYMOUS, Access, Action
from .schemas import TYPES
from .service import Registry, schema_json, version_json
from .state import Version

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED_BODIES = frozenset(
    {
        "application/vnd.schemaregistry.v1+json",
        "application/vnd.schemaregistry+json",
        "application/json",
        "application/octet-stream",
        "",
    }
)
MAX_BODY = 16 * 1024 * 1024  # a schema larger than this is refused with 413

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def reply(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=CONTENT_TYPE)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except errors.RegistryError as e:
        return reply(e.body(), e.status)
    except web.HTTPException as e:  # routing (404, 405) and aiohttp's own (413 body too large)
        if e.status < 400:
            raise
        return reply({"error_code": e.status, "message": f"HTTP {e.status} {e.reason}"}, e.status)
    except Exception as e:
        log.exception("schema registry: %s %s failed", request.method, request.path)
        return reply({"error_code": 500, "message": f"Internal Server Error: {type(e).__name__}"}, 500)


async def _body(request: web.Request) -> Any:
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if content_type not in ACCEPTED_BODIES:
        raise errors.RegistryError(415, 415, "HTTP 415 Unsupported Media Type")
    raw = await request.read()
    try:
        return json.loads(raw)
    except ValueError as e:
        raise errors.bad_request(f"Unexpected character in the request body: {e}") from None


def _id(request: web.Request) -> int:
    return int(request.match_info["id"])


def _who(request: web.Request) -> tuple[str, str]:
    """The principal (set by basic auth) and the client's address, as ACLs name them."""
    return request.get("principal", ANONYMOUS), request.remote or ""


class RegistryApp:
    def __init__(self, registry: Registry, access: Access | None = None) -> None:
        self.r = registry
        self.access = access  # None: every request that got in may do everything

    def _check(self, request: web.Request, action: Action, subject: str | None = None) -> None:
        if self.access is not None:
            self.access.check(*_who(request), action, subject)

    def _readable(self, request: web.Request, subjects: list[str]) -> list[str]:
        return subjects if self.access is None else self.access.readable(*_who(request), subjects)

    def _schema(self, request: web.Request) -> Version:
        """A schema by id, for a principal who may read one of the subjects using it (Confluent's
        SCHEMA_READ)."""
        schema_id = _id(request)
        v = self.r.by_id(schema_id)
        if self.access is not None:
            subjects = sorted({u.subject for u in self.r.state.uses_of(schema_id, deleted=True)})
            if not self._readable(request, subjects):
                raise errors.forbidden(f"User is denied operation Read on Schema: {schema_id}")
        return v

    def app(self, middlewares: list[Any] | None = None) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY, middlewares=[_errors, *(middlewares or [])])
        get, post, put, delete = (
            app.router.add_get,
            app.router.add_post,
            app.router.add_put,
            app.router.add_delete,
        )
        get("/", self.root)
        get("/schemas/types", self.types)
        get("/schemas", self.schemas)
        get(r"/schemas/ids/{id:\d+}", self.schema_by_id)
        get(r"/schemas/ids/{id:\d+}/schema", self.raw_by_id)
        get(r"/schemas/ids/{id:\d+}/subjects", self.subjects_of_id)
        get(r"/schemas/ids/{id:\d+}/versions", self.versions_of_id)
        get("/subjects", self.subjects)
        get("/subjects/{s}/versions", self.versions)
        post("/subjects/{s}/versions", self.register)
        get("/subjects/{s}/versions/{v}", self.get_version)
        delete("/subjects/{s}/versions/{v}", self.delete_version)
        get("/subjects/{s}/versions/{v}/schema", self.raw_version)
        get("/subjects/{s}/versions/{v}/referencedby", self.referenced_by)
        post("/subjects/{s}", self.lookup)
        delete("/subjects/{s}", self.delete_subject)
        get("/config", self.get_config)
        put("/config", self.put_config)
        delete("/config", self.delete_config)
        get("/config/{s}", self.get_config)
        put("/config/{s}", self.put_config)
        delete("/config/{s}", self.delete_config)
        get("/mode", self.get_mode)
        put("/mode", self.put_mode)
        get("/mode/{s}", self.get_mode)
        put("/mode/{s}", self.put_mode)
        delete("/mode/{s}", self.delete_mode)
        post("/compatibility/subjects/{s}/versions/{v}", self.compatibility)
        post("/compatibility/subjects/{s}/versions", self.compatibility)
        return app

    def _check_compatibility(self, request: web.Request, subject: str | None, write: bool) -> None:
        """A subject's config and mode, or the global ones (the cluster's configs in Kafka's terms)."""
        if subject is None:
            action = Action.GLOBAL_COMPATIBILITY_WRITE if write else Action.GLOBAL_COMPATIBILITY_READ
        else:
            action = Action.SUBJECT_COMPATIBILITY_WRITE if write else Action.SUBJECT_COMPATIBILITY_READ
        self._check(request, action, subject)

    async def root(self, request: web.Request) -> web.Response:
        return reply({})

    async def types(self, request: web.Request) -> web.Response:
        return reply(list(TYPES))

    async def schemas(self, request: web.Request) -> web.Response:
        prefix, deleted = request.query.get("subjectPrefix", ""), _flag(request, "deleted")
        state = self.r.state
        out = [
            version_json(v)
            for s in self._readable(request, state.subject_names(deleted))
            if s.startswith(prefix)
            for v in (state.live(s, deleted)[-1:] if _flag(request, "latestOnly") else state.live(s, deleted))
        ]
        return reply(out)

    async def schema_by_id(self, request: web.Request) -> web.Response:
        return reply(schema_json(self._schema(request)))

    async def raw_by_id(self, request: web.Request) -> web.Response:
        return _raw(self._schema(request).schema)

    async def subjects_of_id(self, request: web.Request) -> web.Response:
        schema_id = self._schema(request).id
        uses = self.r.state.uses_of(schema_id, _flag(request, "deleted"))
        return reply(self._readable(request, sorted({v.subject for v in uses})))

    async def versions_of_id(self, request: web.Request) -> web.Response:
        schema_id = self._schema(request).id
        uses = self.r.state.uses_of(schema_id, _flag(request, "deleted"))
        readable = set(self._readable(request, sorted({v.subject for v in uses})))
        return reply([{"subject": v.subject, "version": v.version} for v in uses if v.subject in readable])

    async def subjects(self, request: web.Request) -> web.Response:
        prefix = request.query.get("subjectPrefix", "")
        names = self.r.state.subject_names(_flag(request, "deleted"))
        return reply(self._readable(request, [s for s in names if s.startswith(prefix)]))

    async def versions(self, request: web.Request) -> web.Response:
        self._check(request, Action.SUBJECT_READ, request.match_info["s"])
        live = self.r.versions(request.match_info["s"], _flag(request, "deleted"))
        return reply([v.version for v in live])

    async def register(self, request: web.Request) -> web.Response:
        self._check(request, Action.SUBJECT_WRITE, request.match_info["s"])
        body = await _body(request)
        answer = await self.r.register(request.match_info["s"], body, _flag(request, "normalize"))
        return reply({"id": answer["id"]})

    async def get_version(self, request: web.Request) -> web.Response:
        self._check(request, Action.SUBJECT_READ, request.match_info["s"])
        v = self.r.version(request.match_info["s"], request.match_info["v"], _flag(request, "deleted"))
        return reply(version_json(v))

    async def raw_version(self, request: web.Request) -> web.Response:
        self._check(request, Action.SUBJECT_READ, request.match_info["s"])
        v = self.r.version(request.match_info["s"], request.match_info["v"], _flag(request, "deleted"))
        return _raw(v.schema)

    async def referenced_by(self, request: web.Request) -> web.Response:
        self._check(request, Action.SUBJECT_READ, request.match_info["s"])
        v = self.r.version(request.match_info["s"], request.match_info["v"])
        return reply(self.r.state.referenced_by(v.subject, v.version))

    async def delete_version(self, request: web.Request) -> web.Response:
        self._check(request, Action.SUBJECT_DELETE, request.match_info["s"])
        number = await self.r.delete_version(
            request.match_info["s"], request.match_info["v"], _flag(request, "permanent")
        )
        return reply(number)

    async def lookup(self, request: web.Request) -> web.Response:
        self._check(request, Action.SUBJECT_READ, request.match_info["s"])
        body = await _body(request)
        v = self.r.lookup(
            request.match_info["s"], body, _flag(request, "normalize"), _flag(request, "deleted")
        )
        return reply(version_json(v))

    async def delete_subject(self, request: web.Request) -> web.Response:
        self._check(request, Action.SUBJECT_DELETE, request.match_info["s"])
        return reply(await self.r.delete_subject(request.match_info["s"], _flag(request, "permanent")))

    async def get_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("s")
        self._check_compatibility(request, subject, write=False)
        if subject is not None and subject not in self.r.state.configs:
            if not _flag(request, "defaultToGlobal"):
                raise errors.subject_config_not_found(subject)
            subject = None
        return reply({"compatibilityLevel": self.r.level(subject)})

    async def put_config(self, request: web.Request) -> web.Response:
        self._check_compatibility(request, request.match_info.get("s"), write=True)
        level = await self.r.set_config(request.match_info.get("s"), await _body(request))
        return reply({"compatibility": level})

    async def delete_config(self, request: web.Request) -> web.Response:
        self._check_compatibility(request, request.match_info.get("s"), write=True)
        return reply({"compatibilityLevel": await self.r.delete_config(request.match_info.get("s"))})

    async def get_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("s")
        self._check_compatibility(request, subject, write=False)
        if subject is not None and subject not in self.r.state.modes:
            if not _flag(request, "defaultToGlobal"):
                raise errors.subject_mode_not_found(subject)
            subject = None
        return reply({"mode": self.r.mode(subject)})

    async def put_mode(self, request: web.Request) -> web.Response:
        self._check_compatibility(request, request.match_info.get("s"), write=True)
        return reply({"mode": await self.r.set_mode(request.match_info.get("s"), await _body(request))})

    async def delete_mode(self, request: web.Request) -> web.Response:
        self._check_compatibility(request, request.match_info["s"], write=True)
        return reply({"mode": await self.r.delete_mode(request.match_info["s"])})

    async def compatibility(self, request: web.Request) -> web.Response:
        self._check(request, Action.SUBJECT_WRITE, request.match_info["s"])
        body = await _body(request)
        problems = self.r.incompatibilities(
            request.match_info["s"], body, request.match_info.get("v"), _flag(request, "normalize")
        )
        answer: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            answer["messages"] = problems
        return reply(answer)


def _raw(schema: str) -> web.Response:
    """A schema's own text: JSON schemas as JSON, others (Protobuf) as a JSON string."""
    try:
        json.loads(schema)
        return web.Response(text=schema, content_type=CONTENT_TYPE)
    except ValueError:
        return reply(schema)
