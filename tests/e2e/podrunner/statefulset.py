"""The StatefulSet controller's decisions, pure: which pods to create or delete, their manifests, the
claims they need, and the StatefulSet's status.

- Pods `<name>-<ordinal>` for ordinals below spec.replicas, labelled from the template plus
  `statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index` and `controller-revision-hash`,
  owned by the StatefulSet, with `hostname`/`subdomain` and a node chosen by the caller.
- podManagementPolicy Parallel: every missing pod at once, every pod above replicas at once.
  OrderedReady (the default): one pod at a time, each only once all lower ordinals run and are ready;
  scale-down removes the highest ordinal first, only while every other pod is ready.
- A pod is recreated (from the CURRENT template) only once the old one is gone; a Failed or Succeeded
  pod is deleted so it gets recreated.
- updateStrategy OnDelete: nothing else (whoever deletes a pod rolls it). RollingUpdate: with every
  pod present and ready, the highest outdated ordinal at or above `partition` is deleted, one at a time.
- volumeClaimTemplates: a claim `<template>-<statefulset>-<ordinal>` per pod, mounted as the template's
  volume name (the runner gives each claim one local directory that outlives the pods).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"


def revision(sts: Mapping[str, Any]) -> str:
    template = (sts.get("spec") or {}).get("template") or {}
    raw = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return f"{sts['metadata']['name']}-{hashlib.sha256(raw.encode()).hexdigest()[:10]}"


def ordinal_of(sts_name: str, pod_name: str) -> int | None:
    prefix = f"{sts_name}-"
    if not pod_name.startswith(prefix):
        return None
    tail = pod_name[len(prefix) :]
    return int(tail) if tail.isdigit() and (tail == "0" or not tail.startswith("0")) else None


def owned_pods(sts: Mapping[str, Any], pods: list[JSON]) -> dict[int, JSON]:
    """The StatefulSet's pods by ordinal (owned through the controller ownerReference)."""
    uid = sts["metadata"].get("uid")
    name = sts["metadata"]["name"]
    out: dict[int, JSON] = {}
    for p in pods:
        meta = p.get("metadata") or {}
        if meta.get("namespace") != sts["metadata"].get("namespace"):
            continue
        refs = meta.get("ownerReferences") or []
        if not any(r.get("uid") == uid and r.get("controller") for r in refs):
            continue
        i = ordinal_of(name, str(meta.get("name", "")))
        if i is not None:
            out[i] = p
    return out


def terminating(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def running_and_ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or terminating(pod):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def claim_name(template: Mapping[str, Any], sts_name: str, ordinal: int) -> str:
    return f"{template['metadata']['name']}-{sts_name}-{ordinal}"


def claims(sts: Mapping[str, Any], ordinal: int) -> list[JSON]:
    """The PersistentVolumeClaims pod `ordinal` mounts (created when missing, never deleted here)."""
    meta = sts["metadata"]
    spec = sts.get("spec") or {}
    selector = ((spec.get("selector") or {}).get("matchLabels")) or {}
    out = []
    for t in spec.get("volumeClaimTemplates") or []:
        labels = {**((t.get("metadata") or {}).get("labels") or {}), **selector}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": claim_name(t, meta["name"], ordinal),
                    "namespace": meta.get("namespace"),
                    "labels": labels,
                },
                "spec": copy.deepcopy(t.get("spec") or {}),
            }
        )
    return out


def pod_manifest(sts: Mapping[str, Any], ordinal: int, node: str) -> JSON:
    meta = sts["metadata"]
    spec = sts.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    tmeta = template.get("metadata") or {}
    name = f"{meta['name']}-{ordinal}"
    labels = {
        **(tmeta.get("labels") or {}),
        POD_NAME_LABEL: name,
        POD_INDEX_LABEL: str(ordinal),
        REVISION_LABEL: revision(sts),
    }
    pod_spec: JSON = template.get("spec") or {}
    pod_spec["hostname"] = name
    if spec.get("serviceName"):
        pod_spec["subdomain"] = spec["serviceName"]
    pod_spec["nodeName"] = node
    volumes = [v for v in pod_spec.get("volumes") or []]
    for t in spec.get("volumeClaimTemplates") or []:
        vname = t["metadata"]["name"]
        volumes = [v for v in volumes if v.get("name") != vname]
        volumes.append(
            {"name": vname, "persistentVolumeClaim": {"claimName": claim_name(t, meta["name"], ordinal)}}
        )
    if volumes:
        pod_spec["volumes"] = volumes
    out_meta: JSON = {
        "name": name,
        "namespace": meta.get("namespace"),
        "labels": labels,
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "name": meta["name"],
                "uid": meta.get("uid"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if tmeta.get("annotations"):
        out_meta["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": out_meta, "spec": pod_spec}


@dataclass
class Plan:
    create: list[int] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)  # pod names, in order


def plan(sts: Mapping[str, Any], pods: Mapping[int, JSON]) -> Plan:
    spec = sts.get("spec") or {}
    name = sts["metadata"]["name"]
    replicas = int(spec.get("replicas", 1))
    parallel = spec.get("podManagementPolicy") == "Parallel"
    strategy = spec.get("updateStrategy") or {}
    out = Plan()
    ending = {i for i, p in pods.items() if terminating(p)}
    finished = sorted(
        i
        for i, p in pods.items()
        if i not in ending and (p.get("status") or {}).get("phase") in ("Failed", "Succeeded")
    )
    out.delete += [f"{name}-{i}" for i in finished]
    condemned = sorted((i for i in pods if i >= replicas and i not in ending), reverse=True)
    if parallel:
        out.create = [i for i in range(replicas) if i not in pods]
        out.delete += [f"{name}-{i}" for i in condemned if i not in finished]
    else:
        for i in range(replicas):
            if i not in pods:
                out.create.append(i)
                break
            if not running_and_ready(pods[i]):
                break
        others_ready = all(running_and_ready(p) for i, p in pods.items() if i not in condemned[:1])
        if condemned and not ending and not out.create and others_ready and condemned[0] not in finished:
            out.delete.append(f"{name}-{condemned[0]}")
    if strategy.get("type", "RollingUpdate") == "RollingUpdate" and not out.create and not out.delete:
        current = [pods.get(i) for i in range(replicas)]
        if not ending and all(p is not None and running_and_ready(p) for p in current):
            partition = int((strategy.get("rollingUpdate") or {}).get("partition", 0) or 0)
            want = revision(sts)
            for i in range(replicas - 1, partition - 1, -1):
                labels = (pods[i].get("metadata") or {}).get("labels") or {}
                if labels.get(REVISION_LABEL) != want:
                    out.delete.append(f"{name}-{i}")
                    break
    return out


def status(sts: Mapping[str, Any], pods: Mapping[int, JSON]) -> JSON:
    want = revision(sts)
    live = [p for p in pods.values() if not terminating(p)]
    revs = [((p.get("metadata") or {}).get("labels") or {}).get(REVISION_LABEL) for p in live]
    old = (sts.get("status") or {}).get("currentRevision")
    current = want if all(r == want for r in revs) or not old else old
    ready = sum(1 for p in live if running_and_ready(p))
    return {
        "observedGeneration": sts["metadata"].get("generation"),
        "replicas": len(live),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "currentReplicas": sum(1 for r in revs if r == current),
        "updatedReplicas": sum(1 for r in revs if r == want),
        "currentRevision": current,
        "updateRevision": want,
        "collisionCount": 0,
    }
