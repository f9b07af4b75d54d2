"""RBAC rules as sets of single permissions, and what the operator's code says it needs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Grant = tuple[str, str, str, tuple[str, ...]]  # (API group, resource, verb, resourceNames)


def grants(rules: Iterable[dict[str, Any]]) -> set[Grant]:
    out: set[Grant] = set()
    for r in rules:
        names = tuple(sorted(r.get("resourceNames") or ()))
        for g in r.get("apiGroups", []):
            for res in r.get("resources", []):
                for verb in r.get("verbs", []):
                    out.add((g, res, verb, names))
    return out


def expected(lease_name: str, rack_role: str) -> dict[str, set[Grant]]:
    """kind → grants, derived from brook_operator.kube's declared permission sets."""
    from brook_operator import kube

    cluster = {
        (g, r, v, ()) for g, r, v in kube.OPERATOR_PERMISSIONS | kube.KOPF_PERMISSIONS if r != "leases"
    }
    for g, r, v in kube.API_SERVER_CHECKED:
        cluster.add((g, r, v, (rack_role,) if v == "bind" else ()))
    lease = {
        (g, r, v, () if v == "create" else (lease_name,))
        for g, r, v in kube.OPERATOR_PERMISSIONS
        if r == "leases"
    }
    rack = {(g, r, v, ()) for g, r, v in kube.RACK_INIT_PERMISSIONS}
    return {"ClusterRole": cluster, "Role": lease, "RackClusterRole": rack}
