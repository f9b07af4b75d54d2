"""Shared helpers: the repo's manifests, helm from <repo>/.tools/bin, CRD schema validation."""

from __future__ import annotations

import copy
import os
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from openapi_schema_validator import OAS30Validator

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
CHART = REPO / "charts" / "brook"
HELM = REPO / ".tools" / "bin" / "helm"
INSTALL_SCRIPT = REPO / "scripts" / "install-kube-tools"
KUBE_VERSIONS = ("1.28.0", "1.37.0")
# manifests/*.yaml holding Kubernetes objects (kustomization.yaml lists them for `kubectl apply -k`).
OBJECT_FILES = sorted(p for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")


def load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


@cache
def crds() -> dict[str, dict[str, Any]]:
    """kind → CRD, from manifests/crds."""
    out = {}
    for f in sorted((MANIFESTS / "crds").glob("*.yaml")):
        (crd,) = load_all(f)
        out[crd["spec"]["names"]["kind"]] = crd
    return out


def strict(schema: dict[str, Any]) -> dict[str, Any]:
    """Emulate the API server's pruning as rejection: objects with declared properties accept no others."""
    s = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if (
                node.get("type") == "object"
                and "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(s)
    return s


def cr_errors(obj: dict[str, Any]) -> list[str]:
    """Schema errors of a custom resource against its CRD (served version), pruning emulated."""
    crd = crds()[obj["kind"]]
    group, _, version = obj["apiVersion"].partition("/")
    assert group == crd["spec"]["group"], obj["apiVersion"]
    (ver,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    validator = OAS30Validator(strict(ver["schema"]["openAPIV3Schema"]))
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj))


def helm_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("CACHE", "CONFIG", "DATA"):
        env[f"HELM_{k}_HOME"] = str(tmp / k.lower())
    return env


def ensure_helm() -> Path:
    """helm from <repo>/.tools/bin, installed by scripts/install-kube-tools when missing."""
    if not HELM.exists():
        if not INSTALL_SCRIPT.exists():
            pytest.skip(f"{HELM} is missing and {INSTALL_SCRIPT} (which installs it) does not exist")
        subprocess.run([str(INSTALL_SCRIPT)], check=True, stdout=subprocess.DEVNULL)
    assert HELM.exists(), f"{INSTALL_SCRIPT} did not install {HELM}"
    return HELM


def walk_schema(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, sub in (node.get("properties") or {}).items():
        yield from walk_schema(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk_schema(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk_schema(node["additionalProperties"], f"{path}{{}}")
