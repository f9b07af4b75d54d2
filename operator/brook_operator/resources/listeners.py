"""Pure builders of a Cluster's listeners: the brokers' listener settings (Kafka's names), the
Services that expose external listeners (one per broker plus a bootstrap), and the table of addresses
each broker advertises.

Kafka tells clients to connect to the addresses a broker advertises, so every broker must advertise,
per listener, an address that reaches that very broker from where the listener's clients are:
- internal listeners: the pod's stable DNS name through the headless Service;
- nodeport: a node's address and the broker's own node port (its Service's), so a client outside
  the cluster reaches the node that runs it; the node is known only inside the pod, so the table
  holds `{node}` and the broker's init container fills in its node's address;
- loadbalancer: the external address of the broker's own LoadBalancer Service (from its status,
  observed by the operator), or the host the spec gives for that broker.

The operator's "replication" listener (mutual TLS with the cluster CA) is added when the spec is
secured: brokers replicate over it and the operator administers through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..spec import REPLICATION_LISTENER, ClusterSpec, Listener
from . import names

Manifest = dict[str, Any]
NODE_PLACEHOLDER = "{node}"
BROKER_POD_LABEL = "statefulset.kubernetes.io/pod-name"


def kafka_name(listener: str) -> str:
    """Kafka listener names are upper case by convention (PLAIN, EXTERNAL, REPLICATION)."""
    return listener.upper().replace("-", "_")


def all_listeners(spec: ClusterSpec) -> list[Listener]:
    """The spec's listeners plus, when secured, the operator's replication listener."""
    out = list(spec.listeners)
    if spec.secured:
        out.append(
            Listener(REPLICATION_LISTENER, spec.replication_port, "internal", tls=True, authentication="tls")
        )
    return out


def inter_broker_listener(spec: ClusterSpec) -> str:
    return kafka_name(REPLICATION_LISTENER if spec.secured else spec.listener.name)


def listeners_setting(spec: ClusterSpec) -> str:
    """Kafka's `listeners`: every listener bound on all interfaces."""
    return ",".join(f"{kafka_name(li.name)}://0.0.0.0:{li.port}" for li in all_listeners(spec))


def protocol_map_setting(spec: ClusterSpec) -> str:
    """Kafka's `listener.security.protocol.map`."""
    return ",".join(f"{kafka_name(li.name)}:{li.security_protocol}" for li in all_listeners(spec))


def client_auth_listeners(spec: ClusterSpec) -> list[str]:
    """Listeners that require a client certificate (`ssl.client.auth=required`)."""
    return [kafka_name(li.name) for li in all_listeners(spec) if li.authentication == "tls"]


def sasl_mechanisms(spec: ClusterSpec) -> list[str]:
    mech = {"scram-sha-512": "SCRAM-SHA-512", "plain": "PLAIN", "oauth": "OAUTHBEARER"}
    return sorted({mech[li.authentication] for li in spec.listeners if li.authentication in mech})


def broker_service(cluster: str, listener: str, ordinal: int) -> str:
    return f"{cluster}-{listener}-{ordinal}"


def external_bootstrap_service(cluster: str, listener: str) -> str:
    return f"{cluster}-{listener}-bootstrap"


def _service_type(li: Listener) -> str:
    return "NodePort" if li.type == "nodeport" else "LoadBalancer"


def external_services(cluster: str, namespace: str, spec: ClusterSpec, replicas: int) -> list[Manifest]:
    """Per external listener: a bootstrap Service and one Service per broker (selecting its pod)."""
    out: list[Manifest] = []
    for li in spec.listeners:
        if not li.external:
            continue
        port: dict[str, Any] = {"name": "kafka", "port": li.port, "targetPort": li.port, "protocol": "TCP"}
        boot = dict(port)
        if li.node_port is not None:
            boot["nodePort"] = li.node_port
        out.append(
            _service(
                external_bootstrap_service(cluster, li.name),
                namespace,
                cluster,
                _service_type(li),
                names.selector(cluster, names.BROKER),
                boot,
            )
        )
        for i in range(replicas):
            p = dict(port)
            if li.node_port is not None:
                p["nodePort"] = li.node_port + 1 + i
            selector = {**names.selector(cluster, names.BROKER), BROKER_POD_LABEL: names.pod(cluster, i)}
            name = broker_service(cluster, li.name, i)
            out.append(_service(name, namespace, cluster, _service_type(li), selector, p))
    return out


def _service(
    name: str, namespace: str, cluster: str, type_: str, selector: dict[str, str], port: dict[str, Any]
) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": names.labels(cluster, names.BROKER)},
        "spec": {
            "type": type_,
            "selector": selector,
            "ports": [port],
            # Clients reach the broker the Service names, not any node's broker: no extra hop.
            "externalTrafficPolicy": "Local",
            # A broker is advertised before it is ready (clients retry); its address must exist.
            "publishNotReadyAddresses": True,
        },
    }


def service_address(service: Mapping[str, Any] | None, listener: Listener) -> str | None:
    """The host:port a client outside the cluster uses for a per-broker Service, once known.

    NodePort: the node part comes from the pod (`{node}`); LoadBalancer: the first ingress address.
    """
    if service is None:
        return None
    spec = service.get("spec") or {}
    ports = spec.get("ports") or []
    if listener.type == "nodeport":
        node_port = ports[0].get("nodePort") if ports else None
        return f"{NODE_PLACEHOLDER}:{node_port}" if node_port else None
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    if not ingress:
        return None
    host = ingress[0].get("hostname") or ingress[0].get("ip")
    return f"{host}:{listener.port}" if host else None


def advertised_table(
    cluster: str,
    namespace: str,
    spec: ClusterSpec,
    replicas: int,
    services: Mapping[str, Mapping[str, Any]],
) -> dict[str, str]:
    """Per broker ordinal (as a string): its `advertised.listeners` value, with `{node}` where its
    node's address goes. A broker whose external address is not known yet is left out; its pod waits.

    `services`: the observed per-broker Services of external listeners, by name.
    """
    out: dict[str, str] = {}
    for i in range(replicas):
        parts: list[str] = []
        for li in all_listeners(spec):
            if not li.external:
                host = names.pod_fqdn(cluster, namespace, i)
                parts.append(f"{kafka_name(li.name)}://{host}:{li.port}")
                continue
            addr = service_address(services.get(broker_service(cluster, li.name, i)), li)
            given = li.advertised_hosts.get(i)
            if li.type == "nodeport":
                port = str(li.node_port + 1 + i) if li.node_port is not None else None
                port = port or (addr.rpartition(":")[2] if addr else None)
                addr = f"{given or NODE_PLACEHOLDER}:{port}" if port else None
            elif given is not None:
                addr = f"{given}:{li.port}"
            if addr is None:
                break
            parts.append(f"{kafka_name(li.name)}://{addr}")
        else:
            out[str(i)] = ",".join(parts)
    return out


def fill_node(advertised: str, node_address: str) -> str:
    """What the init container writes: the table's entry with its node's address filled in."""
    return advertised.replace(NODE_PLACEHOLDER, node_address)


def node_address(node: Mapping[str, Any] | None) -> str | None:
    """A node's address clients outside the cluster can use: ExternalIP, else ExternalDNS, else
    InternalIP (kind and minikube nodes have only that)."""
    addrs = ((node or {}).get("status") or {}).get("addresses") or []
    by_type: dict[str, str] = {}
    for a in addrs:
        by_type.setdefault(str(a.get("type")), str(a.get("address")))
    for t in ("ExternalIP", "ExternalDNS", "InternalIP", "Hostname"):
        if t in by_type:
            return by_type[t]
    return None
