"""Pure builders of a managed etcd: a headless Service, a StatefulSet and a PodDisruptionBudget.

The members find each other through the headless Service (`<cluster>-etcd-<i>.<cluster>-etcd.<ns>.svc`)
and bootstrap together (podManagementPolicy Parallel, --initial-cluster-state new); a restarted member
keeps its data directory, so the initial-cluster flags only matter on the first start.
"""

from __future__ import annotations

from typing import Any

from ..spec import ManagedEtcd
from . import names
from .broker import Manifest, pod_disruption_budget, pod_security

CLIENT_PORT = 2379
PEER_PORT = 2380
METRICS_PORT = 2381


def member_host(cluster: str, namespace: str, ordinal: int) -> str:
    svc = names.etcd(cluster)
    return f"{svc}-{ordinal}.{svc}.{namespace}.svc"


def client_endpoints(cluster: str, namespace: str, etcd: ManagedEtcd) -> list[str]:
    return [f"http://{member_host(cluster, namespace, i)}:{CLIENT_PORT}" for i in range(etcd.replicas)]


def service(cluster: str, namespace: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": names.etcd(cluster),
            "namespace": namespace,
            "labels": names.labels(cluster, names.ETCD),
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": names.selector(cluster, names.ETCD),
            "ports": [
                {"name": "client", "port": CLIENT_PORT, "targetPort": "client", "protocol": "TCP"},
                {"name": "peer", "port": PEER_PORT, "targetPort": "peer", "protocol": "TCP"},
            ],
        },
    }


def statefulset(cluster: str, namespace: str, etcd: ManagedEtcd) -> Manifest:
    svc = names.etcd(cluster)
    initial = ",".join(
        f"{svc}-{i}=http://{member_host(cluster, namespace, i)}:{PEER_PORT}" for i in range(etcd.replicas)
    )
    self_host = f"$(POD_NAME).{svc}.{namespace}.svc"
    container: dict[str, Any] = {
        "name": "etcd",
        "image": etcd.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["etcd"],
        "args": [
            "--name=$(POD_NAME)",
            "--data-dir=/var/lib/etcd/data",
            f"--listen-client-urls=http://0.0.0.0:{CLIENT_PORT}",
            f"--advertise-client-urls=http://{self_host}:{CLIENT_PORT}",
            f"--listen-peer-urls=http://0.0.0.0:{PEER_PORT}",
            f"--initial-advertise-peer-urls=http://{self_host}:{PEER_PORT}",
            f"--listen-metrics-urls=http://0.0.0.0:{METRICS_PORT}",
            f"--initial-cluster={initial}",
            "--initial-cluster-state=new",
            f"--initial-cluster-token={svc}.{namespace}",
        ],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [
            {"name": "client", "containerPort": CLIENT_PORT, "protocol": "TCP"},
            {"name": "peer", "containerPort": PEER_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        # /health needs a quorum (readiness); ?serializable=true answers from the local member (liveness).
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": "metrics"},
            "periodSeconds": 5,
            "timeoutSeconds": 3,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/health?serializable=true", "port": "metrics"},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 6,
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/etcd"}],
    }
    if etcd.resources:
        container["resources"] = etcd.resources
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": etcd.size}},
    }
    if etcd.storage_class_name:
        claim_spec["storageClassName"] = etcd.storage_class_name
    sel = names.selector(cluster, names.ETCD)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": svc, "namespace": namespace, "labels": names.labels(cluster, names.ETCD)},
        "spec": {
            "serviceName": svc,
            "replicas": etcd.replicas,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"},
            "selector": {"matchLabels": sel},
            "template": {
                "metadata": {"labels": names.labels(cluster, names.ETCD)},
                "spec": {
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": pod_security(),
                    "terminationGracePeriodSeconds": 30,
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "topologyKey": "kubernetes.io/hostname",
                                        "labelSelector": {"matchLabels": sel},
                                    },
                                }
                            ]
                        }
                    },
                    "containers": [container],
                },
            },
            "volumeClaimTemplates": [
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "data", "labels": names.labels(cluster, names.ETCD)},
                    "spec": claim_spec,
                }
            ],
        },
    }


def manifests(cluster: str, namespace: str, etcd: ManagedEtcd) -> list[Manifest]:
    return [
        service(cluster, namespace),
        statefulset(cluster, namespace, etcd),
        pod_disruption_budget(cluster, namespace, names.ETCD),
    ]
