"""Pure builders: a Cluster (name, namespace, typed spec) → the manifests that run it.

`cluster_manifests` is the one entry point the handlers use; it is deterministic and does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..spec import ClusterSpec
from . import broker, etcd, listeners, names, security
from .broker import Manifest

DEFAULT_RACK_CLUSTER_ROLE = "brook-broker-rack"


def etcd_endpoints(cluster: str, namespace: str, spec: ClusterSpec) -> list[str]:
    if spec.etcd is None:
        return []
    if spec.etcd.managed is not None:
        return etcd.client_endpoints(cluster, namespace, spec.etcd.managed)
    return list(spec.etcd.endpoints)


def cluster_manifests(
    cluster: str,
    namespace: str,
    spec: ClusterSpec,
    *,
    default_image: str,
    replicas: int | None = None,
    services: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Manifest]:
    """Namespaced manifests of a Cluster, in creation order (dependencies first).

    `replicas` overrides spec.replicas for the StatefulSet (a refused scale-down keeps the current count).
    `services`: the observed per-broker Services of external listeners, by name (their addresses go
    into the advertised-listeners table). Certificate Secrets are built by `brook_operator.tls`.
    """
    image = spec.image or default_image
    n = spec.replicas if replicas is None else replicas
    endpoints = etcd_endpoints(cluster, namespace, spec)
    cm = broker.config_map(cluster, namespace, spec, endpoints)
    out: list[Manifest] = []
    if spec.etcd is not None and spec.etcd.managed is not None:
        out += etcd.manifests(cluster, namespace, spec.etcd.managed)
    out += [cm, broker.properties_config_map(cluster, namespace, spec)]
    table: dict[str, str] | None = None
    if security.needs_advertise(spec):
        adv = listeners.advertised_table(cluster, namespace, spec, n, services or {})
        table_cm = security.table_config_map(cluster, namespace, adv)
        table = table_cm["data"]
        out.append(table_cm)
    out += [
        broker.service_account(cluster, namespace),
        broker.headless_service(cluster, namespace, spec),
        broker.bootstrap_service(cluster, namespace, spec),
        *listeners.external_services(cluster, namespace, spec, n),
        broker.statefulset(cluster, namespace, spec, image, cm["data"], replicas, table),
        broker.pod_disruption_budget(cluster, namespace),
    ]
    return out


def managed_etcd_refs(cluster: str) -> list[tuple[str, str]]:
    """(kind, name) of the managed etcd objects: deleted when a Cluster stops asking for them."""
    return [
        ("StatefulSet", names.etcd(cluster)),
        ("Service", names.etcd(cluster)),
        ("PodDisruptionBudget", names.etcd(cluster)),
    ]


def rack_binding(cluster: str, namespace: str, cluster_role: str = DEFAULT_RACK_CLUSTER_ROLE) -> Manifest:
    """Lets the brokers' rack init container read its node's labels (nodes are cluster-scoped).

    Cluster-scoped, so it cannot be garbage-collected through an ownerReference to the namespaced
    Cluster: the Cluster's delete handler removes it.
    """
    meta: dict[str, Any] = {
        "name": names.rack_binding(cluster, namespace),
        "labels": {
            **names.labels(cluster, names.BROKER),
            names.CLUSTER_LABEL: cluster,
            names.CLUSTER_NAMESPACE_LABEL: namespace,
        },
    }
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [
            {"kind": "ServiceAccount", "name": names.service_account(cluster), "namespace": namespace}
        ],
    }
