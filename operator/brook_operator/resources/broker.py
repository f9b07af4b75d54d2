"""Pure builders of a Cluster's broker side: ConfigMap, ServiceAccount, Services, StatefulSet, PDB.

Every function returns a plain manifest dict and depends only on its arguments (deterministic: same
input, same bytes). ownerReferences are added by the handler.

The broker pods' contract with the `brook broker` process (the broker side implements it):
- everything cluster-wide arrives as BROOK_* variables from the ConfigMap (envFrom): BROOK_HOST,
  BROOK_PORT, BROOK_DATA_DIR, BROOK_METRICS_PORT, BROOK_METRICS_HOST (spec.metrics.host: 0.0.0.0 or
  ::, what probes and Prometheus reach at the pod IP), BROOK_LOG_LEVEL, BROOK_ETCD_ENDPOINTS (with
  TLS and an etcd user: etcd_client.py) and the broker settings of spec.config
  (BROOK_NUM_PARTITIONS, ...); topic defaults as `--topic-default`.
- BROOK_NODE_ID comes from the pod's `apps.kubernetes.io/pod-index` label (the StatefulSet ordinal,
  set by Kubernetes >= 1.28); BROOK_POD_NAME (the pod name) lets the broker derive the ordinal itself
  when that label is missing (BROOK_NODE_ID empty: the number after the last '-').
- BROOK_ADVERTISED_HOST is the pod's stable DNS name through the headless Service.
- BROOK_RACK_FILE names a file holding the rack (written by the rack init container) when
  spec.rack is set; an empty or missing file means no rack.
- /healthz (liveness, startup) and /readyz (readiness) are served on the metrics port.
"""

from __future__ import annotations

from typing import Any

from .. import brokerconfig
from ..spec import ClusterSpec
from . import etcd_client, names, security

Manifest = dict[str, Any]


def _meta(name: str, namespace: str, cluster: str, component: str = names.BROKER) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": names.labels(cluster, component)}


def broker_env_config(
    cluster: str, namespace: str, spec: ClusterSpec, etcd_endpoints: list[str]
) -> dict[str, str]:
    """The ConfigMap data: the cluster-wide BROOK_* environment of every broker, sorted."""
    env = {
        "BROOK_HOST": "0.0.0.0",
        "BROOK_PORT": str(spec.listener.port),
        "BROOK_DATA_DIR": names.DATA_DIR,
        "BROOK_METRICS_PORT": str(spec.metrics.port),
        "BROOK_METRICS_HOST": spec.metrics.host,
        "BROOK_LOG_LEVEL": spec.log_level,
    }
    if spec.schema_registry.enabled:
        env["BROOK_SCHEMA_REGISTRY_PORT"] = str(spec.schema_registry.port)
        if spec.schema_registry.tls:
            env["BROOK_SCHEMA_REGISTRY_SSL_CERTFILE"] = f"{security.TLS_DIR}/tls.crt"
            env["BROOK_SCHEMA_REGISTRY_SSL_KEYFILE"] = f"{security.TLS_DIR}/tls.key"
        if spec.schema_registry.basic_auth:
            env["BROOK_SCHEMA_REGISTRY_BASIC_AUTH"] = "true"
    if etcd_endpoints:
        env["BROOK_ETCD_ENDPOINTS"] = ",".join(etcd_endpoints)
    # The schema value mode of Iceberg topics reads each broker's own registry over plain HTTP: not one
    # behind HTTPS (its certificate names the Services, not 127.0.0.1) or basic auth.
    sr = spec.schema_registry
    registry = sr.port if sr.enabled and not (sr.tls or sr.basic_auth) else None
    env.update(spec.iceberg.broker_env(registry))
    env.update(security.config(cluster, spec))
    env.update(etcd_client.config(spec))
    return dict(sorted(env.items()))


def config_map(cluster: str, namespace: str, spec: ClusterSpec, etcd_endpoints: list[str]) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(names.config_map(cluster), namespace, cluster),
        "data": broker_env_config(cluster, namespace, spec, etcd_endpoints),
    }


def properties_config_map(cluster: str, namespace: str, spec: ClusterSpec) -> Manifest:
    """spec.config's broker properties as the brokers' server.properties."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(names.properties_config_map(cluster), namespace, cluster),
        "data": {brokerconfig.PROPERTIES_FILE: brokerconfig.server_properties(spec.config)},
    }


def service_account(cluster: str, namespace: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(names.service_account(cluster), namespace, cluster),
        # Only the rack init container gets a token (a projected volume), never the broker.
        "automountServiceAccountToken": False,
    }


def _ports(spec: ClusterSpec) -> list[dict[str, Any]]:
    return [
        {"name": "kafka", "port": spec.listener.port, "targetPort": "kafka", "protocol": "TCP"},
        {"name": "metrics", "port": spec.metrics.port, "targetPort": "metrics", "protocol": "TCP"},
    ]


def _registry_ports(spec: ClusterSpec) -> list[dict[str, Any]]:
    """The schema registry's port, on the bootstrap Service (any ready broker answers it)."""
    if not spec.schema_registry.enabled:
        return []
    port = spec.schema_registry.port
    return [{"name": "schema-registry", "port": port, "targetPort": "schema-registry", "protocol": "TCP"}]


def headless_service(cluster: str, namespace: str, spec: ClusterSpec) -> Manifest:
    """Stable per-pod DNS names (<pod>.<cluster>-brokers.<ns>.svc), published before readiness."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(names.headless_service(cluster), namespace, cluster),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": names.selector(cluster, names.BROKER),
            "ports": _ports(spec),
        },
    }


def bootstrap_service(cluster: str, namespace: str, spec: ClusterSpec) -> Manifest:
    """The address clients bootstrap from: ready brokers only."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(names.bootstrap_service(cluster), namespace, cluster),
        "spec": {
            "type": "ClusterIP",
            "selector": names.selector(cluster, names.BROKER),
            "ports": [_ports(spec)[0], *security.bootstrap_ports(spec), *_registry_ports(spec)],
        },
    }


def pod_disruption_budget(cluster: str, namespace: str, component: str = names.BROKER) -> Manifest:
    name = names.pdb(cluster) if component == names.BROKER else names.etcd(cluster)
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(name, namespace, cluster, component),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": names.selector(cluster, component)}},
    }


def _rack_init_container(spec: ClusterSpec, image: str) -> dict[str, Any]:
    assert spec.rack_topology_key is not None
    return {
        "name": "rack",
        "image": image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["brook-operator", "rack-init"],
        "args": [
            "--node",
            "$(BROOK_NODE_NAME)",
            "--topology-key",
            spec.rack_topology_key,
            "--output",
            names.RACK_FILE,
        ],
        "env": [{"name": "BROOK_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "securityContext": _container_security(),
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": [
            {"name": "rack", "mountPath": names.RACK_DIR},
            {"name": "kube-api-access", "mountPath": names.TOKEN_DIR, "readOnly": True},
        ],
    }


def _container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def pod_security() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "fsGroup": 10001,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _http_probe(path: str, period: int, failures: int, timeout: int = 3) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "metrics"},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def broker_container(cluster: str, namespace: str, spec: ClusterSpec, image: str) -> dict[str, Any]:
    args = ["broker", "--config", f"{names.PROPERTIES_DIR}/{brokerconfig.PROPERTIES_FILE}"]
    for name, value in brokerconfig.topic_defaults(spec.config).items():
        args += ["--topic-default", f"{name}={value}"]
    env: list[dict[str, Any]] = [
        {"name": "BROOK_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {
            "name": "BROOK_NODE_ID",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{names.POD_INDEX_LABEL}']"}},
        },
        {
            "name": "BROOK_ADVERTISED_HOST",
            "value": f"$(BROOK_POD_NAME).{names.headless_service(cluster)}.{namespace}.svc",
        },
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "data", "mountPath": names.DATA_MOUNT},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "server-properties", "mountPath": names.PROPERTIES_DIR, "readOnly": True},
    ]
    if spec.rack_topology_key is not None:
        env.append({"name": "BROOK_RACK_FILE", "value": names.RACK_FILE})
    env += spec.iceberg.secret_env()
    if spec.rack_topology_key is not None or security.needs_advertise(spec):
        mounts.append({"name": "rack", "mountPath": names.RACK_DIR, "readOnly": True})
    mounts += [m for m in security.broker_mounts(spec) if m["name"] != "rack"]
    mounts += etcd_client.mounts(spec)
    container: dict[str, Any] = {
        "name": "broker",
        "image": image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["brook"],
        "args": args,
        "env": env,
        "envFrom": [{"configMapRef": {"name": names.config_map(cluster)}}],
        "ports": [
            {"name": "kafka", "containerPort": spec.listener.port, "protocol": "TCP"},
            {"name": "metrics", "containerPort": spec.metrics.port, "protocol": "TCP"},
            *security.container_ports(spec),
            *(
                [{"name": "schema-registry", "containerPort": spec.schema_registry.port, "protocol": "TCP"}]
                if spec.schema_registry.enabled
                else []
            ),
        ],
        # Start-up may replay logs after an unclean stop: up to 10 minutes before liveness applies.
        "startupProbe": _http_probe("/healthz", period=5, failures=120),
        "livenessProbe": _http_probe("/healthz", period=10, failures=6, timeout=5),
        "readinessProbe": _http_probe("/readyz", period=5, failures=3),
        "securityContext": _container_security(),
        "volumeMounts": mounts,
    }
    if spec.resources:
        container["resources"] = spec.resources
    return container


def _volumes(cluster: str, spec: ClusterSpec) -> list[dict[str, Any]]:
    vols: list[dict[str, Any]] = [
        {"name": "tmp", "emptyDir": {}},
        {"name": "server-properties", "configMap": {"name": names.properties_config_map(cluster)}},
    ]
    if spec.storage.type == "ephemeral":
        vols.append({"name": "data", "emptyDir": {"sizeLimit": spec.storage.size}})
    if spec.rack_topology_key is not None or security.needs_advertise(spec):
        vols.append({"name": "rack", "emptyDir": {}})
    vols += security.volumes(cluster, spec)
    vols += etcd_client.volumes(spec)
    if spec.rack_topology_key is not None or security.needs_node(spec):
        vols.append(
            {
                "name": "kube-api-access",
                "projected": {
                    "defaultMode": 0o444,
                    "sources": [
                        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    }
                                ]
                            }
                        },
                    ],
                },
            }
        )
    return vols


def pod_template(
    cluster: str,
    namespace: str,
    spec: ClusterSpec,
    image: str,
    config_data: dict[str, str],
    listeners_data: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The broker pod template; its annotations carry the revision (hash of everything else)."""
    sel = names.selector(cluster, names.BROKER)
    pod_spec: dict[str, Any] = {
        "serviceAccountName": names.service_account(cluster),
        "automountServiceAccountToken": False,
        "securityContext": pod_security(),
        "terminationGracePeriodSeconds": 60,
        "enableServiceLinks": False,
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
        "containers": [broker_container(cluster, namespace, spec, image)],
        "volumes": _volumes(cluster, spec),
    }
    inits = []
    if spec.rack_topology_key is not None:
        inits.append(_rack_init_container(spec, image))
    if security.needs_advertise(spec):
        inits.append(security.advertise_init_container(cluster, spec, image, _container_security()))
    if inits:
        pod_spec["initContainers"] = inits
    if spec.rack_topology_key is not None:
        pod_spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": spec.rack_topology_key,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": sel},
            }
        ]
    # A changed advertised address or server.properties restarts the brokers (one at a time): both are
    # read at start-up.
    hashed = {**config_data, "#server.properties": brokerconfig.server_properties(spec.config)}
    if listeners_data is not None:
        hashed["#listeners"] = str(listeners_data)
    annotations = {names.CONFIG_HASH_ANNOTATION: names.stable_hash(hashed)}
    if spec.metrics.enabled:
        annotations.update(
            {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(spec.metrics.port),
                "prometheus.io/path": "/metrics",
            }
        )
    template: dict[str, Any] = {
        "metadata": {"labels": names.labels(cluster, names.BROKER), "annotations": annotations},
        "spec": pod_spec,
    }
    annotations[names.REVISION_ANNOTATION] = pod_revision(template)
    return template


def pod_revision(template: dict[str, Any]) -> str:
    """Hash of a pod template without its own revision annotation."""
    meta = dict(template.get("metadata") or {})
    ann = {k: v for k, v in (meta.get("annotations") or {}).items() if k != names.REVISION_ANNOTATION}
    meta["annotations"] = ann
    return names.stable_hash({"metadata": meta, "spec": template.get("spec")}, length=12)


def statefulset(
    cluster: str,
    namespace: str,
    spec: ClusterSpec,
    image: str,
    config_data: dict[str, str],
    replicas: int | None = None,
    listeners_data: dict[str, str] | None = None,
) -> Manifest:
    """The brokers. updateStrategy OnDelete: the operator rolls pods itself, one at a time, safely."""
    sts_spec: dict[str, Any] = {
        "serviceName": names.headless_service(cluster),
        "replicas": spec.replicas if replicas is None else replicas,
        "podManagementPolicy": "Parallel",
        "updateStrategy": {"type": "OnDelete"},
        "selector": {"matchLabels": names.selector(cluster, names.BROKER)},
        "template": pod_template(cluster, namespace, spec, image, config_data, listeners_data),
    }
    if spec.storage.type == "persistent":
        claim_spec: dict[str, Any] = {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": spec.storage.size}},
        }
        if spec.storage.storage_class_name:
            claim_spec["storageClassName"] = spec.storage.storage_class_name
        sts_spec["volumeClaimTemplates"] = [
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "labels": names.labels(cluster, names.BROKER)},
                "spec": claim_spec,
            }
        ]
        sts_spec["persistentVolumeClaimRetentionPolicy"] = {
            "whenDeleted": "Delete" if spec.storage.delete_claim else "Retain",
            "whenScaled": "Retain",
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(names.statefulset(cluster), namespace, cluster),
        "spec": sts_spec,
    }
