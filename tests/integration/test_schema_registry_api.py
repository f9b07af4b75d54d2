"""The schema registry's REST API against Confluent's contract: paths, status codes and error bodies
(error_code and message), deletes soft and permanent, references, normalize, config and mode, and bad
input answered with a 4xx (never a 500)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from tests.support.registry import call, serving_broker

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving_broker(tmp_path_factory.mktemp("registry-api") / "data") as (_, base):
        yield base


def record(*fields: tuple[str, str], name: str = "R") -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]})


def subject() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


def register(url: str, s: str, schema: str, **extra: object) -> tuple[int, object]:
    return call(f"{url}/subjects/{s}/versions", "POST", {"schema": schema, **extra})


def test_errors_are_confluents(url: str) -> None:
    s = subject()
    assert call(f"{url}/subjects/{s}/versions") == (
        404,
        {"error_code": 40401, "message": f"Subject '{s}' not found."},
    )
    assert register(url, s, record(("a", "int")))[0] == 200
    assert call(f"{url}/subjects/{s}/versions/7")[1]["error_code"] == 40402
    assert call(f"{url}/subjects/{s}/versions/0")[1]["error_code"] == 42202
    assert call(f"{url}/subjects/{s}/versions/abc")[0:1] == (422,)
    assert call(f"{url}/schemas/ids/999999") == (
        404,
        {"error_code": 40403, "message": "Schema 999999 not found"},
    )
    assert call(f"{url}/config/{s}")[1]["error_code"] == 40408
    assert call(f"{url}/config/{s}?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})
    assert call(f"{url}/config", "PUT", {"compatibility": "SIDEWAYS"})[1]["error_code"] == 42203
    assert call(f"{url}/mode", "PUT", {"mode": "SOMETIMES"})[1]["error_code"] == 42204
    lookup = call(f"{url}/subjects/{s}", "POST", {"schema": record(("zzz", "int"))})
    assert lookup == (404, {"error_code": 40403, "message": "Schema not found"})


@pytest.mark.parametrize(
    "body",
    [
        {"schema": '{"type": "record", "name": "R"}'},  # no fields
        {"schema": '{"type": "recor'},  # not JSON
        {"schema": '"nosuchtype"'},
        {"schema": '{"type": "enum", "name": "E", "symbols": ["A", "A"]}'},
        {"schema": '{"type": "object", "properties": 3}', "schemaType": "JSON"},
        {"schema": "!!not a descriptor!!", "schemaType": "PROTOBUF"},
        {"schema": "{}", "schemaType": "XML"},
        {"schemaType": "AVRO"},
    ],
)
def test_invalid_schemas_get_42201(url: str, body: dict[str, str]) -> None:
    status, answer = call(f"{url}/subjects/{subject()}/versions", "POST", body)
    assert (status, answer["error_code"]) == (422, 42201), answer
    assert answer["message"].startswith("Invalid schema")


def test_bad_requests_get_4xx_never_500(url: str) -> None:
    s = subject()
    schema = {"schema": record(("a", "int"))}
    status, answer = call(f"{url}/subjects/{s}/versions", "POST", schema, content_type="text/plain")
    assert (status, answer["error_code"]) == (415, 415)
    status, answer = call(f"{url}/subjects/{s}/versions", "POST", raw=b"{not json")
    assert (status, answer["error_code"]) == (400, 400)
    status, answer = call(f"{url}/subjects/{s}/versions", "POST", raw=b"[1, 2]")
    assert (status, answer["error_code"]) == (422, 422)
    huge = json.dumps({"schema": record(("a", "int")), "pad": "x" * (17 * 1024 * 1024)}).encode()
    status, answer = call(f"{url}/subjects/{s}/versions", "POST", raw=huge)
    assert (status, answer["error_code"]) == (413, 413)
    assert call(f"{url}/no/such/path")[0] == 404
    assert call(f"{url}/subjects/{s}/versions", "PATCH", schema)[0] == 405
    assert call(f"{url}/subjects")[0] == 200  # still serving


def test_versions_ids_and_lookup(url: str) -> None:
    a, b = subject(), subject()
    first = record(("a", "int"), name=f"R{uuid.uuid4().hex[:8]}")
    _, one = register(url, a, first)
    # The same schema under another subject keeps its id; again under the same subject: no new version.
    assert register(url, b, first)[1] == one
    assert register(url, a, json.dumps(json.loads(first), indent=2))[1] == one
    assert call(f"{url}/subjects/{a}/versions") == (200, [1])
    assert call(f"{url}/schemas/ids/{one['id']}/subjects") == (200, sorted([a, b]))
    assert call(f"{url}/schemas/ids/{one['id']}/versions")[1] == sorted(
        [{"subject": a, "version": 1}, {"subject": b, "version": 1}], key=lambda x: x["subject"]
    )
    status, found = call(f"{url}/subjects/{a}", "POST", {"schema": first})
    assert status == 200 and (found["subject"], found["version"], found["id"]) == (a, 1, one["id"])
    assert call(f"{url}/subjects/{a}/versions/latest/schema")[1] == json.loads(first)
    assert call(f"{url}/schemas/types")[1] == ["JSON", "PROTOBUF", "AVRO"]
    assert a in call(f"{url}/subjects")[1]


def test_soft_and_permanent_deletes(url: str) -> None:
    s = subject()
    register(url, s, record(("a", "int")))
    assert register(url, s, record(("a", "int"), ("b", "long")))[1]["error_code"] == 409  # b: no default
    register(
        url,
        s,
        json.dumps(
            {
                "type": "record",
                "name": "R",
                "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "long", "default": 0}],
            }
        ),
    )
    assert call(f"{url}/subjects/{s}/versions")[1] == [1, 2]
    assert call(f"{url}/subjects/{s}/versions/2?permanent=true", "DELETE")[1]["error_code"] == 40407
    assert call(f"{url}/subjects/{s}/versions/2", "DELETE") == (200, 2)
    assert call(f"{url}/subjects/{s}/versions/2", "DELETE")[1]["error_code"] == 40406
    assert call(f"{url}/subjects/{s}/versions")[1] == [1]
    assert call(f"{url}/subjects/{s}/versions?deleted=true")[1] == [1, 2]
    assert call(f"{url}/subjects/{s}/versions/2")[1]["error_code"] == 40402
    assert call(f"{url}/subjects/{s}/versions/2?deleted=true")[1]["version"] == 2
    assert call(f"{url}/subjects/{s}/versions/2?permanent=true", "DELETE") == (200, 2)
    assert call(f"{url}/subjects/{s}?permanent=true", "DELETE")[1]["error_code"] == 40405
    assert call(f"{url}/subjects/{s}", "DELETE") == (200, [1])
    assert call(f"{url}/subjects/{s}", "DELETE")[1]["error_code"] == 40404
    assert s not in call(f"{url}/subjects")[1]
    assert s in call(f"{url}/subjects?deleted=true")[1]
    assert call(f"{url}/subjects/{s}?permanent=true", "DELETE") == (200, [1])
    assert s not in call(f"{url}/subjects?deleted=true")[1]
    assert call(f"{url}/subjects/{s}/versions")[1]["error_code"] == 40401


def test_references_and_referencedby(url: str) -> None:
    dep, user = subject(), subject()
    address = json.dumps(
        {
            "type": "record",
            "name": "Address",
            "namespace": "ref",
            "fields": [{"name": "city", "type": "string"}],
        }
    )
    _, a = register(url, dep, address)
    person = json.dumps(
        {
            "type": "record",
            "name": "Person",
            "namespace": "ref",
            "fields": [{"name": "home", "type": "ref.Address"}],
        }
    )
    assert register(url, user, person)[1]["error_code"] == 42201  # the named type is unknown without it
    refs = [{"name": "ref.Address", "subject": dep, "version": 1}]
    status, p = register(url, user, person, references=refs)
    assert status == 200, p
    assert call(f"{url}/subjects/{dep}/versions/1/referencedby") == (200, [p["id"]])
    assert call(f"{url}/schemas/ids/{p['id']}")[1]["references"] == refs
    status, refused = call(f"{url}/subjects/{dep}", "DELETE")
    assert (status, refused["error_code"]) == (422, 42206)
    assert a["id"] != p["id"]


def test_compatibility_levels_config_and_mode(url: str) -> None:
    s = subject()
    register(url, s, record(("a", "int")))
    wider = record(("a", "long"))  # int → long: readable by the new schema, not by the old
    check = f"{url}/compatibility/subjects/{s}/versions/latest?verbose=true"
    assert call(check, "POST", {"schema": wider})[1]["is_compatible"] is True
    assert call(f"{url}/config/{s}", "PUT", {"compatibility": "FORWARD"}) == (
        200,
        {"compatibility": "FORWARD"},
    )
    status, answer = call(check, "POST", {"schema": wider})
    assert status == 200 and answer["is_compatible"] is False and answer["messages"], answer
    assert register(url, s, wider)[1]["error_code"] == 409
    assert call(f"{url}/config/{s}", "DELETE") == (200, {"compatibilityLevel": "FORWARD"})
    assert register(url, s, wider)[0] == 200  # back at the global BACKWARD
    assert call(f"{url}/mode/{s}", "PUT", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    refused = register(url, s, record(("a", "long"), ("c", "int")))[1]
    assert refused["error_code"] == 42205
    assert call(f"{url}/mode/{s}", "DELETE") == (200, {"mode": "READONLY"})
    assert call(f"{url}/mode") == (200, {"mode": "READWRITE"})


def test_normalize_matches_equivalent_schemas(url: str) -> None:
    s = subject()
    spelled = json.dumps(
        {"type": "record", "name": "N", "namespace": "a.b", "fields": [{"name": "x", "type": "int"}]}
    )
    qualified = json.dumps({"name": "a.b.N", "fields": [{"type": "int", "name": "x"}], "type": "record"})
    _, one = call(f"{url}/subjects/{s}/versions?normalize=true", "POST", {"schema": spelled})
    assert call(f"{url}/subjects/{s}?normalize=true", "POST", {"schema": qualified})[1]["id"] == one["id"]
    assert call(f"{url}/subjects/{s}", "POST", {"schema": qualified})[1]["error_code"] == 40403


def test_import_mode_keeps_given_ids_and_versions(url: str) -> None:
    s = subject()
    body = {"schema": record(("a", "int"), name=f"I{uuid.uuid4().hex[:8]}"), "id": 5000, "version": 7}
    assert register(url, s, body["schema"], id=5000)[1]["error_code"] == 42205  # not in IMPORT mode
    assert call(f"{url}/mode/{s}", "PUT", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    assert call(f"{url}/subjects/{s}/versions", "POST", body) == (200, {"id": 5000})
    assert call(f"{url}/subjects/{s}/versions/7")[1]["id"] == 5000
    other = {"schema": record(("b", "int"), name="Other"), "id": 5000}
    assert call(f"{url}/subjects/{s}/versions", "POST", other)[1]["error_code"] == 42207
