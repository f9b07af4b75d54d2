"""The Cluster reconcile flow: observe, decide (pure modules), write, report.

One pass: parse the spec; observe the StatefulSet, the broker pods and the cluster's Metadata; decide
the StatefulSet's replica count (scale-down guard); write every owned object (unchanged ones are
skipped); restart at most one outdated broker (rolling planner); compute the status. The handlers call
`reconcile_cluster` on create/update/resume and from a timer, so drift is corrected and rolls advance.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from . import GROUP, VERSION, brokerconfig, resources, rolling, scaledown, status, tls
from .admin_access import AdminFor, cluster_admin
from .apply import OwnershipConflict
from .facts import AdminError, ClusterSnapshot
from .kube import ApiError
from .resources import names
from .spec import ClusterSpec, SpecError, parse_cluster

log = logging.getLogger(__name__)

DEFAULT_BOOTSTRAP_TEMPLATE = "{name}-bootstrap.{namespace}.svc:{port}"


class ClusterKube(Protocol):
    async def apply(self, manifest: Mapping[str, Any]) -> str: ...

    async def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None: ...

    async def list(
        self, kind: str, namespace: str | None, label_selector: str | None = None
    ) -> list[dict[str, Any]]: ...

    async def delete(self, kind: str, namespace: str | None, name: str) -> bool: ...


class ClusterAdmin(Protocol):
    async def snapshot(self) -> ClusterSnapshot: ...

    async def min_insync_replicas(self, topics: Iterable[str]) -> dict[str, int]: ...


@dataclass(frozen=True, slots=True)
class OperatorSettings:
    default_image: str
    rack_cluster_role: str = resources.DEFAULT_RACK_CLUSTER_ROLE
    # How the operator reaches a cluster over Kafka (tests outside Kubernetes point it elsewhere).
    bootstrap_template: str = DEFAULT_BOOTSTRAP_TEMPLATE
    # Check brokers' certificates against the bootstrap name (off only where the template points
    # outside Kubernetes' names, as in tests).
    verify_hostname: bool = True


def owner_reference(name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Cluster",
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def with_owner(manifests: Iterable[dict[str, Any]], ref: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for m in manifests:
        m = dict(m)
        meta = dict(m.get("metadata") or {})
        meta["ownerReferences"] = [dict(ref)]
        m["metadata"] = meta
        out.append(m)
    return out


def pod_states(pods: Iterable[Mapping[str, Any]], revision: str) -> list[rolling.PodState]:
    out = []
    for p in pods:
        meta = p.get("metadata") or {}
        ordinal = names.ordinal_of(str(meta.get("name", "")))
        if ordinal is None:
            continue
        conds = (p.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
        ann = meta.get("annotations") or {}
        out.append(
            rolling.PodState(
                name=str(meta["name"]),
                ordinal=ordinal,
                ready=ready and not meta.get("deletionTimestamp"),
                up_to_date=ann.get(names.REVISION_ANNOTATION) == revision,
                terminating=bool(meta.get("deletionTimestamp")),
            )
        )
    return sorted(out, key=lambda s: s.ordinal)


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == uid for r in refs)


async def reconcile_cluster(
    body: Mapping[str, Any],
    *,
    kube: ClusterKube,
    admin_for: AdminFor[ClusterAdmin],
    settings: OperatorSettings,
    now: str,
) -> dict[str, Any]:
    """One reconcile pass of the Cluster `body`; returns the new status (to merge-patch)."""
    meta = body.get("metadata") or {}
    name, namespace, uid = str(meta["name"]), str(meta["namespace"]), str(meta.get("uid", ""))
    generation = meta.get("generation")
    previous = (body.get("status") or {}).get("conditions")
    selector = names.selector_string(name)

    try:
        spec = parse_cluster(name, body.get("spec"))
    except SpecError as e:
        facts = status.ClusterFacts(desired_replicas=0, spec_errors=tuple(e.errors))
        return {
            "observedGeneration": generation,
            "labelSelector": selector,
            "conditions": status.merge_conditions(
                previous, status.cluster_conditions(facts), now=now, generation=generation
            ),
        }

    bootstrap = names.bootstrap_address(name, namespace, spec.listener.port)
    sts_name = names.statefulset(name)
    sts = await kube.get("StatefulSet", namespace, sts_name)
    pods = await kube.list("Pod", namespace, selector)
    services = await _external_services(kube, name, namespace, spec)
    built = resources.cluster_manifests(
        name, namespace, spec, default_image=settings.default_image, services=services
    )
    brokers = next(m for m in built if m["kind"] == "StatefulSet" and m["metadata"]["name"] == sts_name)
    template = brokers["spec"]["template"]
    revision = template["metadata"]["annotations"][names.REVISION_ANNOTATION]
    states = pod_states(pods, revision)
    ready = sum(1 for s in states if s.ready)

    admin = await cluster_admin(
        admin_for, kube, name, namespace, spec, settings.bootstrap_template, settings.verify_hostname
    )
    snapshot: ClusterSnapshot | None = None
    kafka_error: str | None = None
    if ready > 0:
        try:
            snapshot = await admin.snapshot()
        except AdminError as e:
            kafka_error = str(e)
    else:
        kafka_error = "no broker is ready"

    current = int((sts.get("spec") or {}).get("replicas", 0)) if sts is not None else None
    decision = scaledown.plan_replicas(spec.replicas, current, snapshot)

    reconcile_error: str | None = None
    roll_waiting: str | None = None
    try:
        await _write(kube, name, namespace, uid, spec, settings, decision.replicas, services, now)
        plan = await _plan_roll(states, snapshot, admin, spec, expected=decision.replicas)
        roll_waiting = plan.waiting
        if plan.restart is not None:
            log.info("rolling %s/%s: restarting pod %s", namespace, name, plan.restart)
            await kube.delete("Pod", namespace, plan.restart)
    except (ApiError, OwnershipConflict, OSError) as e:  # reported; the next pass retries
        reconcile_error = str(e)

    live = [s for s in states if not s.terminating]
    facts = status.ClusterFacts(
        desired_replicas=spec.replicas,
        current_replicas=len(live),
        ready_brokers=ready,
        updated_brokers=sum(1 for s in live if s.up_to_date),
        statefulset_replicas=decision.replicas,
        kafka=snapshot,
        kafka_error=kafka_error,
        reconcile_error=reconcile_error,
        scale_down_blocked=decision.blocked,
        roll_waiting=roll_waiting,
        was_ready=status.was_ready(previous),
    )
    out: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": status.merge_conditions(
            previous, status.cluster_conditions(facts), now=now, generation=generation
        ),
        "replicas": len(live),
        "labelSelector": selector,
        "readyBrokers": ready,
        "bootstrapServers": bootstrap,
    }
    if snapshot is not None:
        out.update(
            registeredBrokers=list(snapshot.broker_ids),
            controllerId=snapshot.controller_id,
            clusterId=snapshot.cluster_id,
            underReplicatedPartitions=snapshot.under_replicated_partitions,
        )
    return out


async def _write(
    kube: ClusterKube,
    name: str,
    namespace: str,
    uid: str,
    spec: ClusterSpec,
    settings: OperatorSettings,
    replicas: int,
    services: Mapping[str, Mapping[str, Any]],
    now: str,
) -> None:
    built = resources.cluster_manifests(
        name, namespace, spec, default_image=settings.default_image, replicas=replicas, services=services
    )
    if spec.secured:  # certificates first: the brokers' pods mount them
        existing = {n: tls.secret_data(await kube.get("Secret", namespace, n)) for n in tls.names_of(name)}
        made = tls.secrets(name, namespace, spec, existing, dt.datetime.fromisoformat(now))
        built = made + tls.certificates(name, namespace, spec) + built
    for m in with_owner(built, owner_reference(name, uid)):
        result = await kube.apply(m)
        if result != "unchanged":
            log.info("%s %s %s/%s", result, m["kind"], namespace, m["metadata"]["name"])
    if spec.etcd is None or spec.etcd.managed is None:
        etcd_sts = await kube.get("StatefulSet", namespace, names.etcd(name))
        if etcd_sts is not None and _owned_by(etcd_sts, uid):
            for kind, obj in resources.managed_etcd_refs(name):
                await kube.delete(kind, namespace, obj)
    if spec.rack_topology_key is not None or resources.security.needs_node(spec):
        await kube.apply(resources.rack_binding(name, namespace, settings.rack_cluster_role))
    else:
        await kube.delete("ClusterRoleBinding", None, names.rack_binding(name, namespace))


async def _external_services(
    kube: ClusterKube, name: str, namespace: str, spec: ClusterSpec
) -> dict[str, dict[str, Any]]:
    """The per-broker Services of external listeners that exist (their addresses are advertised)."""
    out: dict[str, dict[str, Any]] = {}
    if not any(li.external for li in spec.listeners):
        return out
    for svc in await kube.list("Service", namespace, names.selector_string(name)):
        out[str((svc.get("metadata") or {}).get("name"))] = svc
    return out


async def _plan_roll(
    states: list[rolling.PodState],
    snapshot: ClusterSnapshot | None,
    admin: ClusterAdmin,
    spec: ClusterSpec,
    *,
    expected: int,
) -> rolling.RollPlan:
    if all(s.up_to_date for s in states):
        return rolling.RollPlan(done=True)
    default_min_isr = brokerconfig.min_insync_replicas(spec.config)
    overrides: dict[str, int] = {}
    partitions = snapshot.partitions if snapshot is not None else None
    if snapshot is not None:
        try:
            overrides = await admin.min_insync_replicas({p.topic for p in snapshot.partitions})
        except AdminError:
            partitions = None  # cannot check availability: the planner waits
    return rolling.plan_roll(
        states,
        partitions=partitions,
        min_isr=lambda topic: overrides.get(topic, default_min_isr),
        controller_id=snapshot.controller_id if snapshot is not None else None,
        expected_pods=expected,
    )


async def delete_cluster(body: Mapping[str, Any], *, kube: ClusterKube) -> None:
    """What ownerReferences cannot collect: the cluster-scoped rack ClusterRoleBinding."""
    meta = body.get("metadata") or {}
    await kube.delete(
        "ClusterRoleBinding", None, names.rack_binding(str(meta["name"]), str(meta["namespace"]))
    )
