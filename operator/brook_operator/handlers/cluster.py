"""Cluster handlers: every change, resume and timer tick runs one reconcile pass (cluster.py)."""

from __future__ import annotations

import os
from typing import Any

import kopf

from .. import GROUP, VERSION
from .. import cluster as flow
from ..spec import SpecError, parse_cluster
from .runtime import Runtime, now

RESYNC_SECONDS = float(os.environ.get("BROOK_OPERATOR_CLUSTER_RESYNC_SECONDS", "15"))


@kopf.index(GROUP, VERSION, "clusters")
def cluster_ports(namespace: str | None, name: str, spec: kopf.Spec, **_: Any) -> dict[tuple[str, str], Any]:
    """(namespace, name) → the cluster's typed spec (None: invalid): how Topic handlers reach it."""
    try:
        return {(namespace or "", name): parse_cluster(name, dict(spec))}
    except SpecError:
        return {(namespace or "", name): None}


async def _reconcile(body: kopf.Body, patch: kopf.Patch, memo: Runtime) -> None:
    async with memo.lock("cluster", body.metadata.namespace or "", body.metadata.name or ""):
        new = await flow.reconcile_cluster(
            body, kube=memo.kube, admin_for=memo.admins.get, settings=memo.settings, now=now()
        )
    patch.status.update(new)


@kopf.on.create(GROUP, VERSION, "clusters")
@kopf.on.update(GROUP, VERSION, "clusters")
@kopf.on.resume(GROUP, VERSION, "clusters")
async def cluster_changed(body: kopf.Body, patch: kopf.Patch, memo: Runtime, **_: Any) -> None:
    await _reconcile(body, patch, memo)


@kopf.timer(GROUP, VERSION, "clusters", interval=RESYNC_SECONDS, initial_delay=RESYNC_SECONDS)
async def cluster_resync(body: kopf.Body, patch: kopf.Patch, memo: Runtime, **_: Any) -> None:
    await _reconcile(body, patch, memo)


@kopf.on.delete(GROUP, VERSION, "clusters")
async def cluster_deleted(body: kopf.Body, memo: Runtime, **_: Any) -> None:
    """Owned objects go through garbage collection; only the cluster-scoped binding is removed here."""
    await flow.delete_cluster(body, kube=memo.kube)
