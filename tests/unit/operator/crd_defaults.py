"""Helpers reading the CRDs in manifests/crds (the single source of the schemas)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
CRDS = REPO / "manifests" / "crds"


def crd(plural: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((CRDS / f"{plural}.brook.dev.yaml").read_text())
    return data


def schema(plural: str) -> dict[str, Any]:
    s: dict[str, Any] = crd(plural)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return s


def apply_defaults(sch: dict[str, Any], value: Any) -> Any:
    """Structural defaulting as the API server does it: a missing field with a default gets it,
    recursively, inside objects that exist (and arrays' items)."""
    if isinstance(value, dict) and sch.get("type") == "object":
        out = copy.deepcopy(value)
        for name, sub in (sch.get("properties") or {}).items():
            if name not in out and "default" in sub:
                out[name] = copy.deepcopy(sub["default"])
            if name in out:
                out[name] = apply_defaults(sub, out[name])
        return out
    if isinstance(value, list) and sch.get("type") == "array":
        return [apply_defaults(sch.get("items") or {}, v) for v in value]
    return value
