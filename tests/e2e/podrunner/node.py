"""What the pod runner does as the node agent of a real control plane besides running pods,
where the real StatefulSet controller and scheduler make and place the pods:

- Nodes with capacity, Ready, heartbeats (the node lifecycle controller taints a silent node
  unreachable and evicts its pods);
- a local-path provisioner of its own: a pending claim gets a PersistentVolume pre-bound to it
  (hostPath: the directory the kubelet part mounts, `<workdir>/volumes/<ns>/<claim>`), and the real
  PV controller binds the two; a Released volume it made is deleted (its data stays on disk);
- service-account tokens as a kubelet gets them: TokenRequest for the pod's ServiceAccount, bound to
  the pod, so in-pod API clients authenticate as that account and RBAC applies to them.

Pure builders here; runner.py does the I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

JSON = dict[str, Any]
PROVISIONER = "podrunner.brook.dev/local-path"
# Room for every pod a test makes; the scheduler fits requests into allocatable.
CAPACITY = {"cpu": "32", "memory": "128Gi", "pods": "250", "ephemeral-storage": "200Gi"}


def node_status(name: str, now: str, transitioned: str) -> JSON:
    """Ready, no pressure, capacity and addresses; `now` is the heartbeat."""

    def cond(kind: str, status: str, reason: str) -> JSON:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "lastHeartbeatTime": now,
            "lastTransitionTime": transitioned,
        }

    return {
        "capacity": CAPACITY,
        "allocatable": CAPACITY,
        "conditions": [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID"),
            cond("Ready", "True", "KubeletReady"),
        ],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
        "nodeInfo": {
            "kubeletVersion": "podrunner",
            "operatingSystem": "linux",
            "architecture": "amd64",
            "containerRuntimeVersion": "podrunner://local-processes",
        },
    }


def claims_to_provision(claims: list[JSON], volumes: list[JSON]) -> list[JSON]:
    """Pending claims that no PersistentVolume is bound or pre-bound to."""
    taken = {
        str(((v.get("spec") or {}).get("claimRef") or {}).get("uid"))
        for v in volumes
        if (v.get("spec") or {}).get("claimRef")
    }
    return [
        c
        for c in claims
        if not (c.get("spec") or {}).get("volumeName")
        and (c.get("status") or {}).get("phase", "Pending") == "Pending"
        and not c["metadata"].get("deletionTimestamp")
        and str(c["metadata"]["uid"]) not in taken
    ]


def persistent_volume(claim: Mapping[str, Any], directory: Path) -> JSON:
    meta, spec = claim["metadata"], claim.get("spec") or {}
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta['uid']}",
            "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": size},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": spec.get("storageClassName") or "",
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "hostPath": {"path": str(directory), "type": "DirectoryOrCreate"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
        },
    }


def released(volumes: list[JSON]) -> list[str]:
    """Names of the volumes this provisioner made whose claim is gone."""
    return [
        str(v["metadata"]["name"])
        for v in volumes
        if ((v["metadata"].get("annotations") or {}).get("pv.kubernetes.io/provisioned-by") == PROVISIONER)
        and (v.get("status") or {}).get("phase") in ("Released", "Failed")
    ]


def token_request(pod: Mapping[str, Any], source: Mapping[str, Any]) -> JSON:
    """The TokenRequest a kubelet sends for a projected serviceAccountToken source of `pod`."""
    spec: JSON = {
        "expirationSeconds": int(source.get("expirationSeconds") or 3607),
        "boundObjectRef": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod["metadata"]["name"],
            "uid": pod["metadata"]["uid"],
        },
    }
    if source.get("audience"):
        spec["audiences"] = [source["audience"]]
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


def token_kubeconfig(path: Path, server: str, ca_file: str | None, token: str, namespace: str) -> Path:
    """What an in-cluster client would build from the mounted token (the runner's pods find the API
    server through KUBECONFIG: no KUBERNETES_SERVICE_HOST routes here)."""
    cluster: JSON = {"server": server}
    if ca_file:
        cluster["certificate-authority"] = ca_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "in-cluster", "cluster": cluster}],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [
                    {
                        "name": "in-cluster",
                        "context": {"cluster": "in-cluster", "user": "sa", "namespace": namespace},
                    }
                ],
                "current-context": "in-cluster",
            }
        )
    )
    path.chmod(0o600)
    return path
