"""Cluster handlers: every change, resume and timer tick runs one reconcile pass (cluster.py)."""

from __future__ import annotations

import os
from typing import Any

import kopf

from .. import GROUP, VERSION
from .. import cluster as flow
from .runtime import Runtime, now

RESYNC_SECONDS = float(os.environ.get("BROOK_OPERATOR_CLUSTER_RESYNC_SECONDS", "15"))


@kopf.index(GROUP, VERSION, "clusters")
def cluster_ports(namespace: str | None, name: str, spec: kopf.Spec, **_: Any) -> dict[tuple[str, str], int]:
    """(namespace, name) → the cluster's Kafka port: how Topic handlers find their cluster."""
    listeners = spec.get("listeners") or [{}]
    port = listeners[0].get("port", 9092) if isinstance(listeners[0], dict) else 9092
    return {(namespace or "", name): int(port)}


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
