"""Topic handlers: reconcile on change, resume and a timer (reverting out-of-band changes); delete
through the finalizer unless the keep annotation says otherwise."""

from __future__ import annotations

import os
from typing import Any

import kopf

from .. import GROUP, VERSION, topics
from ..admin_access import cluster_admin
from ..spec import ClusterSpec
from .runtime import Runtime, now

RESYNC_SECONDS = float(os.environ.get("BROOK_OPERATOR_TOPIC_RESYNC_SECONDS", "60"))


@kopf.index(GROUP, VERSION, "topics")
def topic_claims(
    body: kopf.Body, namespace: str | None, spec: kopf.Spec, **_: Any
) -> dict[tuple[str, str, str], topics.Claim]:
    """(namespace, cluster, topic name) → the claims of every Topic resource naming it."""
    key = (namespace or "", str(spec.get("cluster", "")), topics.topic_name_of(body))
    return {key: topics.claim_of(body)}


async def _context(
    body: kopf.Body, memo: Runtime, indices: dict[str, Any]
) -> tuple[list[topics.Claim], topics.TopicAdmin | None]:
    """The claims on this resource's topic and the admin client of its cluster (None: no such Cluster)."""
    claim_index: kopf.Index[tuple[str, str, str], topics.Claim] = indices["topic_claims"]
    spec_index: kopf.Index[tuple[str, str], ClusterSpec | None] = indices["cluster_ports"]
    ns = body.metadata.namespace or ""
    cluster = str(body.spec.get("cluster", ""))
    claims = list(claim_index.get((ns, cluster, topics.topic_name_of(body)), []))
    specs = [s for s in spec_index.get((ns, cluster), []) if s is not None]
    if not specs:
        return claims, None
    s = memo.settings
    admin = await cluster_admin(
        memo.admins.get, memo.kube, cluster, ns, specs[0], s.bootstrap_template, s.verify_hostname
    )
    return claims, admin


@kopf.on.create(GROUP, VERSION, "topics")
@kopf.on.update(GROUP, VERSION, "topics")
@kopf.on.resume(GROUP, VERSION, "topics")
@kopf.timer(GROUP, VERSION, "topics", interval=RESYNC_SECONDS, initial_delay=RESYNC_SECONDS)
async def topic_reconcile(body: kopf.Body, patch: kopf.Patch, memo: Runtime, **kwargs: Any) -> None:
    claims, admin = await _context(body, memo, kwargs)
    async with memo.lock("topic", body.metadata.namespace or "", body.metadata.name or ""):
        new = await topics.reconcile_resource(body, claims=claims, admin=admin, now=now())
    patch.status.update(new)


@kopf.on.delete(GROUP, VERSION, "topics")
async def topic_deleted(body: kopf.Body, memo: Runtime, logger: kopf.Logger, **kwargs: Any) -> None:
    claims, admin = await _context(body, memo, kwargs)
    async with memo.lock("topic", body.metadata.namespace or "", body.metadata.name or ""):
        decision = await topics.delete_resource(body, claims=claims, admin=admin)
    logger.info(decision.message)
