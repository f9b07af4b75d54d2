"""Avro schemas: parsing (fastavro validates them), the forms compared for identity, and compatibility by
Avro's schema resolution rules (a reader schema reads data written with a writer schema).

What the resolution check covers, as Confluent's AvroCompatibilityChecker: records by name (or a reader
alias), each reader field found in the writer by name or alias and readable, or with a default; enums (the
writer's symbols known to the reader, or a reader default); fixed by name and size; arrays and maps by
their items and values; unions branch by branch; the promotions int → long → float → double and
string ↔ bytes. Logical types are read as their underlying types.
"""

from __future__ import annotations

import json
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from .errors import invalid_schema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})
_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}

Names = dict[str, Any]  # fullname -> the named type's node (names resolved, see _expand)


class AvroSchema:
    """A parsed Avro schema: `text` as stored and served (compact JSON), `normalized` for normalize=true
    (full names, no namespaces, sorted keys), the expanded tree and its named types for compatibility."""

    def __init__(self, text: str, references: list[str]) -> None:
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise invalid_schema(f"{text[:200]}, details: not JSON: {e}") from e
        named: dict[str, Any] = {}
        self.names: Names = {}
        try:
            for ref in references:
                ref_raw = json.loads(ref)
                fastavro.parse_schema(ref_raw, named_schemas=named)
                _expand(ref_raw, "", self.names)
            fastavro.parse_schema(raw, named_schemas=named)
            self.root = _expand(raw, "", self.names)  # also refuses what fastavro lets by (no "fields")
            normal = _normal_form(raw, "")
        except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError, AttributeError) as e:
            raise invalid_schema(f"{text[:200]}, details: {type(e).__name__}: {e}") from e
        self.text = json.dumps(raw, separators=(",", ":"))
        self.normalized = json.dumps(normal, separators=(",", ":"), sort_keys=True)


def _fullname(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _expand(s: Any, namespace: str, names: Names) -> Any:
    """A tree where named types are dicts keyed by full name and references to them are {"$ref": name}."""
    if isinstance(s, str):
        if s in PRIMITIVES:
            return s
        full = _fullname(s, namespace)
        return {"$ref": full if full in names else s}
    if isinstance(s, list):
        return [_expand(b, namespace, names) for b in s]
    t = s.get("type")
    if isinstance(t, (dict, list)) or (isinstance(t, str) and t not in _NAMED and t not in ("array", "map")):
        return _expand(t, namespace, names)  # {"type": "int", "logicalType": ...} and {"type": {...}}
    if t in ("array", "map"):
        key = "items" if t == "array" else "values"
        return {"type": t, key: _expand(s[key], namespace, names)}
    full = _fullname(s["name"], s.get("namespace", namespace))
    ns = full.rpartition(".")[0]
    aliases = [_fullname(a, ns) for a in s.get("aliases", [])]
    node: dict[str, Any] = {"type": "record" if t == "error" else t, "name": full, "aliases": aliases}
    names[full] = node
    if t == "enum":
        node["symbols"] = list(s["symbols"])
        node["default"] = s.get("default")
    elif t == "fixed":
        node["size"] = s["size"]
    else:
        node["fields"] = [
            {
                "name": f["name"],
                "aliases": list(f.get("aliases", [])),
                "has_default": "default" in f,
                "type": _expand(f["type"], ns, names),
            }
            for f in s["fields"]
        ]
    return node


def _normal_form(s: Any, namespace: str) -> Any:
    if isinstance(s, str):
        return s if s in PRIMITIVES else _fullname(s, namespace)
    if isinstance(s, list):
        return [_normal_form(b, namespace) for b in s]
    if not isinstance(s, dict):
        return s
    out = {k: v for k, v in s.items() if k != "namespace"}
    t = s.get("type")
    ns = namespace
    if t in _NAMED and "name" in s:
        full = _fullname(s["name"], s.get("namespace", namespace))
        out["name"] = full
        ns = full.rpartition(".")[0]
    if isinstance(t, (dict, list)) or (
        isinstance(t, str) and t not in PRIMITIVES and t not in _NAMED and t not in ("array", "map")
    ):
        out["type"] = _normal_form(t, ns)
    for key in ("items", "values"):
        if key in s:
            out[key] = _normal_form(s[key], ns)
    if "fields" in s:
        out["fields"] = [{**f, "type": _normal_form(f["type"], ns)} for f in s["fields"]]
    return out


def _resolve(node: Any, names: Names) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        node = names.get(node["$ref"], "null")
    return node


def _kind(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "union"
    return str(node["type"])


def _short(name: str) -> str:
    return name.rpartition(".")[2]


class _Checker:
    def __init__(self, reader_names: Names, writer_names: Names) -> None:
        self.rn, self.wn = reader_names, writer_names
        self.assumed: set[tuple[str, str]] = set()  # record pairs being checked (recursive types)
        self.problems: list[str] = []

    def check(self, reader: Any, writer: Any, path: str) -> bool:
        r, w = _resolve(reader, self.rn), _resolve(writer, self.wn)
        rk, wk = _kind(r), _kind(w)
        if wk == "union":
            return all([self.check(r, b, f"{path}/{i}") for i, b in enumerate(w)])
        if rk == "union":
            for b in r:
                trial = _Checker(self.rn, self.wn)
                trial.assumed = set(self.assumed)
                if trial.check(b, w, path):
                    return True
            return self._fail(path, f"reader union lacks writer type {_describe(w)}")
        if rk != wk:
            if wk in _PROMOTIONS and rk in _PROMOTIONS[wk]:
                return True
            return self._fail(path, f"type mismatch: reader {_describe(r)}, writer {_describe(w)}")
        if rk in PRIMITIVES:
            return True
        if rk == "array":
            return self.check(r["items"], w["items"], f"{path}/items")
        if rk == "map":
            return self.check(r["values"], w["values"], f"{path}/values")
        if not self._names_match(r, w):
            return self._fail(path, f"name mismatch: reader {r['name']}, writer {w['name']}")
        if rk == "fixed":
            return r["size"] == w["size"] or self._fail(
                path, f"fixed size mismatch: reader {r['size']}, writer {w['size']}"
            )
        if rk == "enum":
            missing = [x for x in w["symbols"] if x not in r["symbols"]]
            if missing and r.get("default") is None:
                return self._fail(path, f"reader enum {r['name']} lacks symbols {missing}")
            return True
        return self._record(r, w, path)

    def _record(self, r: dict[str, Any], w: dict[str, Any], path: str) -> bool:
        pair = (r["name"], w["name"])
        if pair in self.assumed:
            return True
        self.assumed.add(pair)
        ok = True
        by_name = {f["name"]: f for f in w["fields"]}
        for f in r["fields"]:
            wf = next((by_name[n] for n in [f["name"], *f["aliases"]] if n in by_name), None)
            if wf is None:
                if not f["has_default"]:
                    ok = self._fail(
                        f"{path}/fields/{f['name']}",
                        f"reader field '{f['name']}' has no default and is missing from the writer",
                    )
                continue
            ok = self.check(f["type"], wf["type"], f"{path}/fields/{f['name']}") and ok
        return ok

    def _names_match(self, r: dict[str, Any], w: dict[str, Any]) -> bool:
        wanted = _short(w["name"])
        return any(_short(n) == wanted for n in [r["name"], *r["aliases"]])

    def _fail(self, path: str, message: str) -> bool:
        self.problems.append(f"{message} at {path or '/'}")
        return False


def _describe(node: Any) -> str:
    if isinstance(node, dict) and "name" in node:
        return f"{node['type']} {node['name']}"
    return _kind(node)


def can_read(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    """Why `reader` cannot read data written with `writer`; empty when it can."""
    checker = _Checker(reader.names, writer.names)
    checker.check(reader.root, writer.root, "")
    return checker.problems
