"""`brook schema ...`: a Confluent-compatible Schema Registry (Brook's, Confluent's, Karapace's) over its
REST API: list subjects, get, register, check compatibility, delete, and the compatibility level. The
registry's error bodies become one line with its error_code."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from .common import CommandError, Output, OutputOpt, command, emit

app = typer.Typer(
    help="Schemas in a schema registry: list, get, register, check, delete, config.", no_args_is_help=True
)

Url = Annotated[
    str,
    typer.Option("--registry", "-r", envvar="BROOK_SCHEMA_REGISTRY", help="the registry's URL"),
]
DEFAULT_URL = "http://127.0.0.1:8081"
UserInfo = Annotated[
    str | None,
    typer.Option("--user", "-u", envvar="BROOK_SCHEMA_REGISTRY_USER_INFO", help="USER:PASSWORD (basic auth)"),
]
CaFile = Annotated[
    Path | None,
    typer.Option("--ca", envvar="BROOK_SCHEMA_REGISTRY_CA", help="PEM CA bundle for an https:// registry"),
]


class Registry:
    """Where and how to reach the registry (the options every command takes)."""

    def __init__(self, url: str, user: str | None, ca: Path | None) -> None:
        self.url, self.user, self.ca = url.rstrip("/"), user, ca


TypeOpt = Annotated[str, typer.Option("--type", "-t", help="AVRO, JSON or PROTOBUF")]
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def _call(r: Registry, path: str, method: str = "GET", body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(r.url + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", CONTENT_TYPE)
    if r.user:
        req.add_header("Authorization", "Basic " + base64.b64encode(r.user.encode()).decode())
    try:
        context = ssl.create_default_context(cafile=str(r.ca)) if r.ca else None
        with urllib.request.urlopen(req, timeout=15, context=context) as resp:
            text = resp.read()
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            err = json.loads(raw)
            message = f"{err['message']} (error_code {err['error_code']})"
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {e.code} {e.reason}"
        raise CommandError(message) from None
    except (urllib.error.URLError, OSError, ssl.SSLError) as e:
        raise CommandError(f"cannot reach the schema registry at {r.url}: {e} (check --registry)") from None
    return json.loads(text) if text else None


def _schema_body(path: Path, schema_type: str) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror}", 2) from None
    return {"schema": text, "schemaType": schema_type.upper()}


def _post_schema(r: Registry, path: str, file: Path, schema_type: str) -> Any:
    return _call(r, path, "POST", _schema_body(file, schema_type))


def _s(subject: str) -> str:
    return quote(subject, safe="")


@app.command("list")
@command
def list_(
    prefix: Annotated[str, typer.Option("--prefix", help="only subjects starting so")] = "",
    deleted: Annotated[bool, typer.Option("--deleted", help="soft-deleted subjects too")] = False,
    registry: Url = DEFAULT_URL,
    user: UserInfo = None,
    ca: CaFile = None,
    output: OutputOpt = Output.table,
) -> None:
    """Subjects with their latest version and schema id."""
    query = f"?subjectPrefix={quote(prefix)}&latestOnly=true" + ("&deleted=true" if deleted else "")
    latest = _call(Registry(registry, user, ca), f"/schemas{query}")
    rows = [(v["subject"], v["version"], v["id"], v.get("schemaType", "AVRO")) for v in latest]
    emit(output, latest, ["SUBJECT", "VERSION", "ID", "TYPE"], rows)


@app.command("get")
@command
def get(
    subject: str,
    version: Annotated[str, typer.Option("--version", "-v", help="a number or latest")] = "latest",
    registry: Url = DEFAULT_URL,
    user: UserInfo = None,
    ca: CaFile = None,
    output: OutputOpt = Output.yaml,
) -> None:
    """A subject's version: its id, version and schema."""
    emit(output, _call(Registry(registry, user, ca), f"/subjects/{_s(subject)}/versions/{quote(version)}"))


@app.command("register")
@command
def register(
    subject: str,
    file: Annotated[Path, typer.Argument(help="the schema's file")],
    schema_type: TypeOpt = "AVRO",
    normalize: Annotated[bool, typer.Option("--normalize")] = False,
    registry: Url = DEFAULT_URL,
    user: UserInfo = None,
    ca: CaFile = None,
) -> None:
    """Register a schema under a subject (checked against the subject's compatibility level)."""
    path = f"/subjects/{_s(subject)}/versions?normalize={str(normalize).lower()}"
    answer = _post_schema(Registry(registry, user, ca), path, file, schema_type)
    print(f"registered {subject}: id {answer['id']}")


@app.command("check")
@command
def check(
    subject: str,
    file: Annotated[Path, typer.Argument(help="the schema's file")],
    schema_type: TypeOpt = "AVRO",
    registry: Url = DEFAULT_URL,
    user: UserInfo = None,
    ca: CaFile = None,
) -> None:
    """Would the schema be accepted under the subject? Exit 0 if so, 1 with the reasons if not."""
    path = f"/compatibility/subjects/{_s(subject)}/versions?verbose=true"
    answer = _post_schema(Registry(registry, user, ca), path, file, schema_type)
    if not answer["is_compatible"]:
        raise CommandError("incompatible: " + "; ".join(answer.get("messages") or []))
    print(f"compatible with {subject}")


@app.command("delete")
@command
def delete(
    subject: str,
    version: Annotated[str | None, typer.Option("--version", "-v", help="one version (default: all)")] = None,
    permanent: Annotated[
        bool, typer.Option("--permanent", help="after a soft delete: remove for good")
    ] = False,
    registry: Url = DEFAULT_URL,
    user: UserInfo = None,
    ca: CaFile = None,
) -> None:
    """Soft-delete a subject (or one version); --permanent removes what was soft-deleted."""
    path = f"/subjects/{_s(subject)}" + (f"/versions/{quote(version)}" if version else "")
    answer = _call(Registry(registry, user, ca), f"{path}?permanent={str(permanent).lower()}", "DELETE")
    gone = answer if isinstance(answer, list) else [answer]
    print(f"deleted {subject} version(s) {', '.join(map(str, gone))}" + (" permanently" if permanent else ""))


@app.command("config")
@command
def config(
    subject: Annotated[str | None, typer.Argument(help="a subject (default: the global level)")] = None,
    compatibility: Annotated[
        str | None,
        typer.Option("--compatibility", "-c", help="set: NONE, BACKWARD, FORWARD, FULL[_TRANSITIVE]"),
    ] = None,
    registry: Url = DEFAULT_URL,
    user: UserInfo = None,
    ca: CaFile = None,
) -> None:
    """Show or set the compatibility level, globally or for one subject."""
    path = "/config" + (f"/{_s(subject)}" if subject else "")
    if compatibility is not None:
        answer = _call(Registry(registry, user, ca), path, "PUT", {"compatibility": compatibility.upper()})
        print(f"{subject or 'global'}: {answer['compatibility']}")
        return
    level = _call(Registry(registry, user, ca), path + ("?defaultToGlobal=true" if subject else ""))[
        "compatibilityLevel"
    ]
    print(f"{subject or 'global'}: {level}")
