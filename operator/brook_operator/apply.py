"""How a built manifest is written over the live object (pure; `kube.Kube.apply` does the I/O).

The operator replaces (PUT) an owned object only when the manifest it built changed, which it detects
by a hash annotation, so a periodic reconcile of an unchanged Cluster writes nothing. A replace keeps
what the API server or other controllers own: immutable fields (a Service's cluster IPs, a
StatefulSet's selector and volumeClaimTemplates) and labels/annotations the manifest does not set.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .resources.names import APPLIED_HASH_ANNOTATION, stable_hash

Manifest = dict[str, Any]

# Fields the API server assigns or forbids changing, kept from the live object on replace.
_KEEP_SPEC: dict[str, tuple[str, ...]] = {
    "Service": ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "healthCheckNodePort"),
    "StatefulSet": ("selector", "serviceName", "podManagementPolicy", "volumeClaimTemplates"),
    "PodDisruptionBudget": (),
}


class OwnershipConflict(Exception):
    """The live object is controlled by someone else: it is not overwritten."""


def with_applied_hash(manifest: Manifest) -> tuple[Manifest, str]:
    """A copy of `manifest` carrying the hash of its content in an annotation."""
    out = copy.deepcopy(manifest)
    h = stable_hash(manifest)
    out.setdefault("metadata", {}).setdefault("annotations", {})[APPLIED_HASH_ANNOTATION] = h
    return out, h


def unchanged(live: Mapping[str, Any], applied_hash: str) -> bool:
    return ((live.get("metadata") or {}).get("annotations") or {}).get(
        APPLIED_HASH_ANNOTATION
    ) == applied_hash


def _controller_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            uid = ref.get("uid")
            return str(uid) if uid is not None else None
    return None


def check_ownership(live: Mapping[str, Any], desired: Mapping[str, Any]) -> None:
    """Raise OwnershipConflict when `live` is controlled by another owner than `desired` names."""
    want = _controller_uid(desired)
    have = _controller_uid(live)
    if want is not None and have is not None and want != have:
        meta = live.get("metadata") or {}
        where = f"{meta.get('namespace', '')}/{meta.get('name')}"
        raise OwnershipConflict(f"{live.get('kind')} {where} is controlled by another owner")


def prepare_replace(live: Mapping[str, Any], desired: Manifest) -> Manifest:
    """The body of a PUT that turns `live` into `desired` without touching what others own."""
    out = copy.deepcopy(desired)
    live_meta = live.get("metadata") or {}
    meta = out.setdefault("metadata", {})
    meta["resourceVersion"] = live_meta.get("resourceVersion")
    for key in ("labels", "annotations"):
        merged = dict(live_meta.get(key) or {})
        merged.update(meta.get(key) or {})
        if merged:
            meta[key] = merged
    kind = str(desired.get("kind"))
    live_spec = live.get("spec") or {}
    if kind in _KEEP_SPEC and isinstance(out.get("spec"), dict):
        for field in _KEEP_SPEC[kind]:
            if field in live_spec:
                out["spec"][field] = copy.deepcopy(live_spec[field])
    return out
