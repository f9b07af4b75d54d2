"""Structural-schema semantics of a CRD's openAPIV3Schema: pruning, defaulting, validation.

Order as in kube-apiserver: drop nulls of non-nullable fields and prune unknown fields, apply
defaults top-down, then validate. Messages follow kube-openapi's wording so that tests (and users)
see the same text as from a real server.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from .errors import FieldError

JSON = dict[str, Any]

ROOT_META = ("apiVersion", "kind", "metadata")


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def prune(obj: Any, schema: JSON, path: str = "", *, root: bool = True) -> list[str]:
    """Remove unknown fields (and nulls of non-nullable fields) in place; return their paths."""
    removed: list[str] = []
    if isinstance(obj, dict):
        props: JSON = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        for key in list(obj):
            value = obj[key]
            # The root's apiVersion/kind/metadata are ObjectMeta for the API server, whatever the schema
            # says (controller-gen CRDs declare `metadata: {type: object}`): never pruned here.
            if (root or embedded) and key in ROOT_META:
                continue
            sub: JSON | None = None
            if key in props:
                sub = props[key]
            elif isinstance(addl, dict):
                sub = addl
            elif addl is True or preserve:
                continue
            if sub is None:
                removed.append(_join(path, key))
                del obj[key]
                continue
            if value is None and not sub.get("nullable"):
                del obj[key]
                continue
            removed += prune(value, sub, _join(path, key), root=False)
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(obj):
                removed += prune(item, items, f"{path}[{i}]", root=False)
    return removed


def apply_defaults(obj: Any, schema: JSON) -> None:
    """Set `default` for absent properties, top-down, recursing into what is (now) present."""
    if isinstance(obj, dict):
        props: JSON = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
        for key, value in obj.items():
            if key in props:
                apply_defaults(value, props[key])
            elif isinstance(schema.get("additionalProperties"), dict):
                apply_defaults(value, schema["additionalProperties"])
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            apply_defaults(item, schema["items"])


def _num(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def validate(obj: Any, schema: JSON, path: str = "", *, root: bool = True) -> list[FieldError]:
    errs: list[FieldError] = []
    shown = path or "<root>"
    if obj is None:
        if schema.get("nullable"):
            return []
        if schema.get("type"):
            return [
                FieldError(
                    path,
                    "Invalid value",
                    f'{shown} in body must be of type {schema["type"]}: "null"',
                    "null",
                    True,
                )
            ]
        return []

    want = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(obj, (int, str)) or isinstance(obj, bool):
            errs.append(
                FieldError(
                    path,
                    "Invalid value",
                    f'{shown} in body must be of type integer,string: "{type_name(obj)}"',
                    type_name(obj),
                    True,
                )
            )
            return errs
    elif want:
        got = type_name(obj)
        ok = (
            got == want
            or (want == "number" and got == "integer")
            or (want == "integer" and got == "number" and float(obj).is_integer())
        )
        if not ok:
            errs.append(
                FieldError(
                    path, "Invalid value", f'{shown} in body must be of type {want}: "{got}"', got, True
                )
            )
            return errs

    if "enum" in schema and obj not in schema["enum"]:
        allowed = ", ".join(_quoted(v) for v in schema["enum"])
        errs.append(FieldError(path, "Unsupported value", f"supported values: {allowed}", obj, True))

    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        if "minimum" in schema:
            lo = schema["minimum"]
            if schema.get("exclusiveMinimum") and obj <= lo:
                errs.append(
                    FieldError(
                        path, "Invalid value", f"{shown} in body should be greater than {_num(lo)}", obj, True
                    )
                )
            elif obj < lo:
                errs.append(
                    FieldError(
                        path,
                        "Invalid value",
                        f"{shown} in body should be greater than or equal to {_num(lo)}",
                        obj,
                        True,
                    )
                )
        if "maximum" in schema:
            hi = schema["maximum"]
            if schema.get("exclusiveMaximum") and obj >= hi:
                errs.append(
                    FieldError(
                        path, "Invalid value", f"{shown} in body should be less than {_num(hi)}", obj, True
                    )
                )
            elif obj > hi:
                errs.append(
                    FieldError(
                        path,
                        "Invalid value",
                        f"{shown} in body should be less than or equal to {_num(hi)}",
                        obj,
                        True,
                    )
                )
        if "multipleOf" in schema and schema["multipleOf"] and obj % schema["multipleOf"] != 0:
            errs.append(
                FieldError(
                    path,
                    "Invalid value",
                    f"{shown} in body should be a multiple of {_num(schema['multipleOf'])}",
                    obj,
                    True,
                )
            )

    if isinstance(obj, str):
        if "maxLength" in schema and len(obj) > schema["maxLength"]:
            errs.append(FieldError(path, "Too long", f"may not be more than {schema['maxLength']} bytes"))
        if "minLength" in schema and len(obj) < schema["minLength"]:
            errs.append(
                FieldError(
                    path,
                    "Invalid value",
                    f"{shown} in body should be at least {schema['minLength']} chars long",
                    obj,
                    True,
                )
            )
        if "pattern" in schema and not re.search(schema["pattern"], obj):
            errs.append(
                FieldError(
                    path, "Invalid value", f"{shown} in body should match '{schema['pattern']}'", obj, True
                )
            )

    if isinstance(obj, list):
        if "maxItems" in schema and len(obj) > schema["maxItems"]:
            errs.append(
                FieldError(path, "Too many", f"must have at most {schema['maxItems']} items", len(obj), True)
            )
        if "minItems" in schema and len(obj) < schema["minItems"]:
            errs.append(
                FieldError(
                    path,
                    "Invalid value",
                    f"{shown} in body should have at least {schema['minItems']} items",
                    len(obj),
                    True,
                )
            )
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "set" or schema.get("uniqueItems"):
            seen: list[Any] = []
            for i, item in enumerate(obj):
                if item in seen:
                    errs.append(FieldError(f"{path}[{i}]", "Duplicate value", "", item, True))
                seen.append(item)
        elif list_type == "map":
            keys = schema.get("x-kubernetes-list-map-keys") or []
            seen_keys: list[tuple[Any, ...]] = []
            for i, item in enumerate(obj):
                if isinstance(item, dict):
                    k = tuple(item.get(key) for key in keys)
                    if k in seen_keys:
                        errs.append(
                            FieldError(
                                f"{path}[{i}]", "Duplicate value", "", dict(zip(keys, k, strict=True)), True
                            )
                        )
                    seen_keys.append(k)
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(obj):
                errs += validate(item, items, f"{path}[{i}]", root=False)

    if isinstance(obj, dict):
        props: JSON = schema.get("properties") or {}
        for req in schema.get("required") or []:
            if req not in obj:
                errs.append(FieldError(_join(path, req), "Required value"))
        if "maxProperties" in schema and len(obj) > schema["maxProperties"]:
            errs.append(
                FieldError(
                    path, "Too many", f"must have at most {schema['maxProperties']} items", len(obj), True
                )
            )
        if "minProperties" in schema and len(obj) < schema["minProperties"]:
            errs.append(
                FieldError(
                    path,
                    "Invalid value",
                    f"{shown} in body should have at least {schema['minProperties']} properties",
                    len(obj),
                    True,
                )
            )
        addl = schema.get("additionalProperties")
        for key, value in obj.items():
            if root and key in ROOT_META:
                continue
            if key in props:
                errs += validate(value, props[key], _join(path, key), root=False)
            elif isinstance(addl, dict):
                errs += validate(value, addl, _join(path, key), root=False)

    for sub in schema.get("allOf") or []:
        errs += validate(obj, sub, path, root=root)
    if schema.get("anyOf") and not any(not validate(obj, s, path, root=root) for s in schema["anyOf"]):
        errs.append(
            FieldError(
                path, "Invalid value", f"{shown} in body must validate at least one schema (anyOf)", obj, True
            )
        )
    if schema.get("oneOf"):
        matched = sum(1 for s in schema["oneOf"] if not validate(obj, s, path, root=root))
        if matched != 1:
            errs.append(
                FieldError(
                    path,
                    "Invalid value",
                    f"{shown} in body must validate one and only one schema (oneOf)",
                    obj,
                    True,
                )
            )
    if isinstance(schema.get("not"), dict) and not validate(obj, schema["not"], path, root=root):
        errs.append(
            FieldError(
                path, "Invalid value", f"{shown} in body should not validate the schema (not)", obj, True
            )
        )
    return errs


def _quoted(v: Any) -> str:
    return f'"{v}"' if isinstance(v, str) else str(v)


def sub_schema(schema: JSON | None, key: str) -> JSON | None:
    if not schema:
        return None
    props = schema.get("properties") or {}
    sub = props.get(key)
    return sub if isinstance(sub, dict) else None


def check_structural(schema: Any, path: str = "spec.versions[0].schema.openAPIV3Schema") -> list[FieldError]:
    """The few structural-schema rules a CRD must satisfy to be accepted (types on every node)."""
    errs: list[FieldError] = []
    if not isinstance(schema, dict):
        return [FieldError(path, "Required value")]
    if (
        "type" not in schema
        and not schema.get("x-kubernetes-int-or-string")
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        errs.append(
            FieldError(f"{path}.type", "Required value", "must not be empty for specified object fields")
        )
    if (
        schema.get("type") == "object"
        and schema.get("properties")
        and isinstance(schema.get("additionalProperties"), dict)
    ):
        errs.append(
            FieldError(
                f"{path}.additionalProperties",
                "Forbidden",
                "additionalProperties and properties are mutual exclusive",
            )
        )
    for key, sub in (schema.get("properties") or {}).items():
        errs += check_structural(sub, f"{path}.properties[{key}]")
    if isinstance(schema.get("items"), dict):
        errs += check_structural(schema["items"], f"{path}.items")
    if isinstance(schema.get("additionalProperties"), dict):
        errs += check_structural(schema["additionalProperties"], f"{path}.additionalProperties")
    return errs
