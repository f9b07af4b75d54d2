"""Names and labels of everything built for a Cluster (one place, so builders and handlers agree)."""

from __future__ import annotations

import hashlib
import json

PART_OF = "brook"
MANAGED_BY = "brook-operator"
BROKER = "broker"
ETCD = "etcd"

# Annotations and labels the operator owns.
REVISION_ANNOTATION = "brook.dev/revision"  # pod template hash: a pod with another value is outdated
PROPERTIES_DIR = "/etc/brook/config"  # the brokers' server.properties (brook broker --config)
CONFIG_HASH_ANNOTATION = "brook.dev/config-hash"  # hash of the ConfigMap the pods read
APPLIED_HASH_ANNOTATION = "brook.dev/applied-hash"  # hash of the manifest last written by the operator
KEEP_TOPIC_ANNOTATION = "brook.dev/keep-topic-on-delete"
CLUSTER_LABEL = "brook.dev/cluster"
CLUSTER_NAMESPACE_LABEL = "brook.dev/cluster-namespace"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"  # set on StatefulSet pods by Kubernetes >= 1.28

DATA_MOUNT = "/var/lib/brook"
DATA_DIR = "/var/lib/brook/data"  # a subdirectory: a fresh volume's root may hold lost+found
RACK_DIR = "/var/run/brook"
RACK_FILE = "/var/run/brook/rack"
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def statefulset(cluster: str) -> str:
    return f"{cluster}-broker"


def pod(cluster: str, ordinal: int) -> str:
    return f"{statefulset(cluster)}-{ordinal}"


def headless_service(cluster: str) -> str:
    return f"{cluster}-brokers"


def bootstrap_service(cluster: str) -> str:
    return f"{cluster}-bootstrap"


def config_map(cluster: str) -> str:
    return f"{cluster}-config"


def properties_config_map(cluster: str) -> str:
    """The server.properties of spec.config, mounted at PROPERTIES_DIR."""
    return f"{cluster}-server-properties"


def service_account(cluster: str) -> str:
    return f"{cluster}-broker"


def pdb(cluster: str) -> str:
    return f"{cluster}-broker"


def etcd(cluster: str) -> str:
    return f"{cluster}-etcd"


def rack_binding(cluster: str, namespace: str) -> str:
    return f"brook-rack-{namespace}-{cluster}"


def broker_tls_secret(cluster: str) -> str:
    return f"{cluster}-broker-tls"


def broker_principal(cluster: str) -> str:
    """The brokers' certificate's principal (Kafka's default builder: the subject's DN)."""
    return f"User:CN={cluster}-broker"


def operator_principal(cluster: str) -> str:
    return f"User:CN={cluster}-operator"


def labels(cluster: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "brook",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def selector(cluster: str, component: str) -> dict[str, str]:
    """The immutable selector of a component's pods (a subset of `labels`)."""
    return {
        "app.kubernetes.io/name": "brook",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/component": component,
    }


def selector_string(cluster: str, component: str = BROKER) -> str:
    return ",".join(f"{k}={v}" for k, v in selector(cluster, component).items())


def pod_fqdn(cluster: str, namespace: str, ordinal: int) -> str:
    return f"{pod(cluster, ordinal)}.{headless_service(cluster)}.{namespace}.svc"


def bootstrap_address(cluster: str, namespace: str, port: int) -> str:
    return f"{bootstrap_service(cluster)}.{namespace}.svc:{port}"


def ordinal_of(pod_name: str) -> int | None:
    """The StatefulSet ordinal at the end of a pod name (`x-broker-3` → 3), or None."""
    head, sep, tail = pod_name.rpartition("-")
    return int(tail) if sep and head and tail.isdigit() else None


def stable_hash(obj: object, length: int = 16) -> str:
    """A deterministic hash of a JSON-able value (key order does not matter)."""
    raw = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()[:length]
