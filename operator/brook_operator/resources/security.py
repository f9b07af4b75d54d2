"""Pure builders of what a secured Cluster adds to its broker pods: listener and TLS settings in the
ConfigMap, the certificate Secret mounted, the advertised-listeners table and the init container that
turns it into this broker's `advertised.listeners`.

The broker pods' contract (extends the one in broker.py):
- BROOK_LISTENERS, BROOK_LISTENER_SECURITY_PROTOCOL_MAP, BROOK_INTER_BROKER_LISTENER_NAME: Kafka's
  listeners, listener.security.protocol.map, inter.broker.listener.name.
- BROOK_ADVERTISED_LISTENERS_FILE: a file holding this broker's advertised.listeners, written by the
  `advertise` init container from the table in the `<cluster>-listeners` ConfigMap (its entry for
  this broker, `{node}` replaced by the node's address).
- BROOK_SSL_KEYSTORE_LOCATION / BROOK_SSL_KEY_LOCATION / BROOK_SSL_TRUSTSTORE_LOCATION: PEM files of
  the mounted `<cluster>-broker-tls` Secret (reloaded by the broker when they change: renewals need
  no restart); BROOK_SSL_CLIENT_AUTH_LISTENERS: listeners that require a client certificate.
- BROOK_SASL_ENABLED_MECHANISMS, BROOK_AUTHORIZER_CLASS_NAME, BROOK_SUPER_USERS.
"""

from __future__ import annotations

import json
from typing import Any

from ..spec import ClusterSpec
from . import listeners, names

Manifest = dict[str, Any]
TLS_DIR = "/etc/brook/tls"
ADVERTISED_FILE = "/var/run/brook/advertised-listeners"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def listeners_config_map(cluster: str) -> str:
    return f"{cluster}-listeners"


def needs_advertise(spec: ClusterSpec) -> bool:
    """More than the single plain listener: each broker's advertised listeners come from the table."""
    return len(listeners.all_listeners(spec)) > 1 or spec.secured


def needs_node(spec: ClusterSpec) -> bool:
    """A nodeport listener advertises its node's address: the init container reads the Node."""
    return any(li.type == "nodeport" for li in spec.listeners)


def config(cluster: str, spec: ClusterSpec) -> dict[str, str]:
    """The ConfigMap entries (cluster-wide) of the listeners and security settings."""
    if not needs_advertise(spec):
        return {}
    env = {
        "BROOK_LISTENERS": listeners.listeners_setting(spec),
        "BROOK_LISTENER_SECURITY_PROTOCOL_MAP": listeners.protocol_map_setting(spec),
        "BROOK_INTER_BROKER_LISTENER_NAME": listeners.inter_broker_listener(spec),
        "BROOK_ADVERTISED_LISTENERS_FILE": ADVERTISED_FILE,
    }
    if spec.secured:
        env.update(
            BROOK_SSL_KEYSTORE_LOCATION=f"{TLS_DIR}/tls.crt",
            BROOK_SSL_KEY_LOCATION=f"{TLS_DIR}/tls.key",
            BROOK_SSL_TRUSTSTORE_LOCATION=f"{TLS_DIR}/ca.crt",
        )
        auth = listeners.client_auth_listeners(spec)
        if auth:
            env["BROOK_SSL_CLIENT_AUTH_LISTENERS"] = ",".join(auth)
    mechanisms = listeners.sasl_mechanisms(spec)
    if mechanisms:
        env["BROOK_SASL_ENABLED_MECHANISMS"] = ",".join(mechanisms)
    oauth = next((li.oauth for li in spec.listeners if li.oauth is not None), None)
    if oauth is not None:
        env.update(oauth.broker_env())
    if spec.authorization.enabled:
        env["BROOK_AUTHORIZER_CLASS_NAME"] = AUTHORIZER
        supers = [
            names.broker_principal(cluster),
            names.operator_principal(cluster),
            *spec.authorization.super_users,
        ]
        env["BROOK_SUPER_USERS"] = ";".join(dict.fromkeys(supers))
    return env


def table_config_map(cluster: str, namespace: str, table: dict[str, str]) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": listeners_config_map(cluster),
            "namespace": namespace,
            "labels": names.labels(cluster, names.BROKER),
        },
        "data": {"advertised.json": json.dumps(table, sort_keys=True)},
    }


def advertise_init_container(
    cluster: str, spec: ClusterSpec, image: str, security: dict[str, Any]
) -> dict[str, Any]:
    """Writes this broker's advertised.listeners from the table (an environment variable: a broker
    whose external address is not known yet fails here and the kubelet retries with the table's
    newer value, so the broker never starts advertising an address nobody can reach)."""
    args = ["--pod", "$(BROOK_POD_NAME)", "--output", ADVERTISED_FILE]
    mounts: list[dict[str, Any]] = [{"name": "rack", "mountPath": names.RACK_DIR}]
    env: list[dict[str, Any]] = [
        {"name": "BROOK_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {
            "name": "BROOK_ADVERTISED_TABLE",
            "valueFrom": {
                "configMapKeyRef": {"name": listeners_config_map(cluster), "key": "advertised.json"}
            },
        },
    ]
    if needs_node(spec):
        args += ["--node", "$(BROOK_NODE_NAME)"]
        env.append({"name": "BROOK_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})
        mounts.append({"name": "kube-api-access", "mountPath": names.TOKEN_DIR, "readOnly": True})
    return {
        "name": "advertise",
        "image": image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["brook-operator", "advertise"],
        "args": args,
        "env": env,
        "securityContext": security,
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": mounts,
    }


def broker_mounts(spec: ClusterSpec) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if needs_advertise(spec):
        out.append({"name": "rack", "mountPath": names.RACK_DIR, "readOnly": True})
    if spec.secured:
        out.append({"name": "tls", "mountPath": TLS_DIR, "readOnly": True})
    return out


def volumes(cluster: str, spec: ClusterSpec) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if spec.secured:
        out.append(
            {"name": "tls", "secret": {"secretName": names.broker_tls_secret(cluster), "defaultMode": 0o440}}
        )
    return out


def container_ports(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Container ports of every listener but the first internal one (named "kafka" in broker.py)."""
    first = spec.listener
    return [
        {"name": li.name[:15], "containerPort": li.port, "protocol": "TCP"}
        for li in listeners.all_listeners(spec)
        if li is not first
    ]


def bootstrap_ports(spec: ClusterSpec) -> list[dict[str, Any]]:
    """The bootstrap Service's ports besides the first listener's: the other internal listeners (a
    User's Secret names this Service with its listener's port) and, when secured, the replication
    listener's, through which the operator administers the cluster."""
    first = spec.listener
    out = [
        {"name": li.name[:15], "port": li.port, "targetPort": li.port, "protocol": "TCP"}
        for li in spec.listeners
        if not li.external and li is not first
    ]
    if spec.secured:
        port = spec.replication_port
        out.append({"name": "replication", "port": port, "targetPort": port, "protocol": "TCP"})
    return out
