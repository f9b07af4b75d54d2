"""The three patch formats: JSON patch (RFC 6902), JSON merge patch (RFC 7386), strategic merge patch.

Strategic merge patch covers what kubectl apply/patch send for built-in kinds: lists merged by key
(containers by name, container ports by containerPort, service ports by port, env by name, ...),
primitive lists merged as sets (finalizers), and the directives $patch (merge/replace/delete),
$setElementOrder/<list>, $deleteFromPrimitiveList/<list> and $retainKeys.
"""

from __future__ import annotations

import copy
from typing import Any

JSON = dict[str, Any]


class PatchError(Exception):
    """A patch that cannot be applied (answered 422) or parsed (answered 400)."""

    def __init__(self, message: str, *, bad_request: bool = False) -> None:
        super().__init__(message)
        self.bad_request = bad_request


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: true is not 1, 1 equals 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


# ---------------------------------------------------------------- RFC 6902


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], op: str, path: str) -> Any:
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}": missing value')
    return cur


def _get(doc: Any, path: str, op: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, op, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}": missing value')


def _add(doc: Any, path: str, value: Any, op: str = "add") -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, op, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}": invalid index')
    else:
        raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}": missing value')
    return doc


def _remove(doc: Any, path: str, op: str = "remove") -> Any:
    parts = _pointer(path)
    if not parts:
        raise PatchError(f"{op} operation does not apply: cannot remove the whole document")
    parent = _parent(doc, parts, op, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}": missing value')


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchError(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch", bad_request=True
        )
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise PatchError("unexpected kind of JSON patch operation", bad_request=True)
        kind, path = op["op"], op.get("path", "")
        if not isinstance(path, str):
            raise PatchError("path must be a string", bad_request=True)
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            _get(doc, path, "replace")
            if _pointer(path):
                _remove(doc, path, "replace")
            doc = _add(doc, path, copy.deepcopy(op.get("value")), "replace")
        elif kind == "move":
            value = _remove(doc, op.get("from", ""), "move")
            doc = _add(doc, path, value, "move")
        elif kind == "copy":
            value = copy.deepcopy(_get(doc, op.get("from", ""), "copy"))
            doc = _add(doc, path, value, "copy")
        elif kind == "test":
            try:
                current = _get(doc, path, "test")
            except PatchError:
                current = None
                if op.get("value") is not None:
                    raise PatchError(f"testing value {path} failed: test failed") from None
            if not json_equal(current, op.get("value")):
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}", bad_request=True)
    return doc


# ---------------------------------------------------------------- RFC 7386


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# ---------------------------------------------------------------- strategic merge

# List fields merged by key, matched on the suffix of the path of field names (list indices left out).
_MERGE_KEYS: list[tuple[tuple[str, ...], str]] = [
    (("containers", "ports"), "containerPort"),
    (("initContainers", "ports"), "containerPort"),
    (("ephemeralContainers", "ports"), "containerPort"),
    (("containers",), "name"),
    (("initContainers",), "name"),
    (("ephemeralContainers",), "name"),
    (("env",), "name"),
    (("volumeMounts",), "mountPath"),
    (("volumeDevices",), "devicePath"),
    (("volumes",), "name"),
    (("imagePullSecrets",), "name"),
    (("hostAliases",), "ip"),
    (("topologySpreadConstraints",), "topologyKey"),
    (("resourceClaims",), "name"),
    (("ownerReferences",), "uid"),
    (("conditions",), "type"),
    (("containerStatuses",), "name"),
]
_KIND_MERGE_KEYS: dict[str, list[tuple[tuple[str, ...], str]]] = {
    "Service": [(("spec", "ports"), "port")],
}
# Primitive lists merged as ordered sets.
_PRIMITIVE_MERGE: list[tuple[str, ...]] = [("metadata", "finalizers")]


def _merge_key(kind: str, path: tuple[str, ...]) -> str | None:
    for suffix, key in _KIND_MERGE_KEYS.get(kind, []) + _MERGE_KEYS:
        if path[-len(suffix) :] == suffix:
            if suffix == ("spec", "ports") and len(path) != 2:
                continue
            return key
    return None


def _is_primitive_merge(path: tuple[str, ...]) -> bool:
    return any(path[-len(s) :] == s for s in _PRIMITIVE_MERGE)


def _strip(value: Any) -> Any:
    """A patch value used as-is (nothing to merge with): drop directives and null fields."""
    if isinstance(value, dict):
        if value.get("$patch") == "delete":
            return None
        out = {}
        for k, v in value.items():
            if k.startswith("$"):
                continue
            if v is None:
                continue
            sv = _strip(v)
            if sv is not None or v is None:
                out[k] = sv
        return out
    if isinstance(value, list):
        return [
            _strip(v) for v in value if not (isinstance(v, dict) and v.get("$patch") in ("delete", "replace"))
        ]
    return value


def strategic_merge(original: JSON, patch: JSON, kind: str) -> JSON:
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object", bad_request=True)
    merged: JSON = _merge_map(copy.deepcopy(original), patch, kind, ())
    return merged


def _merge_map(orig: Any, patch: JSON, kind: str, path: tuple[str, ...]) -> Any:
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip({k: v for k, v in patch.items() if k != "$patch"})
    if directive == "delete":
        return None
    if directive not in (None, "merge"):
        raise PatchError(f"Unknown patch type: {directive}", bad_request=True)
    result: JSON = dict(orig) if isinstance(orig, dict) else {}
    orders: dict[str, list[Any]] = {}
    deletions: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value if isinstance(value, list) else []
        elif key.startswith("$deleteFromPrimitiveList/"):
            deletions[key.split("/", 1)[1]] = value if isinstance(value, list) else []
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        sub = (*path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _merge_map(result.get(key), value, kind, sub)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, kind, sub)
        else:
            result[key] = value
    for key, values in deletions.items():
        if isinstance(result.get(key), list):
            result[key] = [v for v in result[key] if v not in values]
    for key, order in orders.items():
        if isinstance(result.get(key), list):
            result[key] = _reorder(result[key], order, _merge_key(kind, (*path, key)))
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(orig: Any, patch: list[Any], kind: str, path: tuple[str, ...]) -> list[Any]:
    current = list(orig) if isinstance(orig, list) else []
    key = _merge_key(kind, path)
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [_strip(v) for v in patch if not (isinstance(v, dict) and "$patch" in v and len(v) == 1)]
    if key is not None and all(isinstance(v, dict) for v in patch):
        for item in patch:
            if item.get("$patch") == "delete":
                current = [c for c in current if not (isinstance(c, dict) and c.get(key) == item.get(key))]
                continue
            for i, existing in enumerate(current):
                if isinstance(existing, dict) and key in item and existing.get(key) == item.get(key):
                    current[i] = _merge_map(existing, item, kind, path)
                    break
            else:
                current.append(_strip(item))
        return current
    if _is_primitive_merge(path):
        for item in patch:
            if item not in current:
                current.append(item)
        return current
    return [_strip(v) for v in patch]


def _reorder(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    def ident(v: Any) -> Any:
        if key is not None and isinstance(v, dict):
            return v.get(key)
        return v

    wanted = [ident(o) for o in order]
    ranked = [it for it in items if ident(it) in wanted]
    ranked.sort(key=lambda it: wanted.index(ident(it)))
    rest = [it for it in items if ident(it) not in wanted]
    return ranked + rest


def apply_patch_merge(original: JSON, applied: JSON, kind: str, *, strategic: bool) -> JSON:
    """Server-side apply, loosely: merge the applied configuration into the live object.

    No managedFields and no field ownership: fields the applier dropped are not removed, and there
    are no conflicts between managers."""
    if strategic:
        return strategic_merge(original, applied, kind)
    merged: JSON = merge_patch(original, applied)
    return merged
