"""Which certificate Secrets a secured Cluster needs and what they hold (pure: observed Secret data and
the time in, desired Secret manifests out).

- `<cluster>-cluster-ca`: the CA that signs the brokers' and the operator's certificates.
- `<cluster>-clients-ca`: the CA that signs Users' client certificates (authentication: tls).
- `<cluster>-broker-tls`: the brokers' certificate (valid for every broker's in-cluster names, the
  bootstrap Service and the external hosts), its key, and the CA bundle brokers trust (cluster CA +
  clients CA). Also the brokers' client certificate on the replication listener
  (principal User:CN=<cluster>-broker).
- `<cluster>-operator-tls`: the operator's client certificate (User:CN=<cluster>-operator, a super user)
  for its admin calls on the replication listener.

Steady state: everything current is kept byte for byte, so applying the result changes nothing.
Renewal re-issues a leaf from the same CA key inside `renewBeforeDays`, and a CA with its own key;
Kubernetes updates the mounted files in place and brokers reload them without a restart.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from typing import Any

from . import certs
from .resources import names
from .resources.listeners import external_bootstrap_service
from .spec import ClusterSpec

Manifest = dict[str, Any]
SecretData = Mapping[str, bytes]
TLS_DIR = "/etc/brook/tls"


def cluster_ca(cluster: str) -> str:
    return f"{cluster}-cluster-ca"


def clients_ca(cluster: str) -> str:
    return f"{cluster}-clients-ca"


def broker_tls(cluster: str) -> str:
    return names.broker_tls_secret(cluster)


def operator_tls(cluster: str) -> str:
    return f"{cluster}-operator-tls"


def broker_hosts(cluster: str, namespace: str, spec: ClusterSpec) -> list[str]:
    """Every name a client may dial a broker by: pods through the headless Service, the bootstrap
    Services, external hosts given in the spec (addresses known only at run time, such as node IPs,
    are reached with hostname verification off, as Strimzi's NodePort listeners)."""
    headless = names.headless_service(cluster)
    hosts = [
        f"*.{headless}.{namespace}.svc",
        f"*.{headless}.{namespace}.svc.cluster.local",
        f"{names.bootstrap_service(cluster)}.{namespace}.svc",
        f"{names.bootstrap_service(cluster)}.{namespace}.svc.cluster.local",
        names.bootstrap_service(cluster),
    ]
    for li in spec.listeners:
        if li.external:
            hosts.append(f"{external_bootstrap_service(cluster, li.name)}.{namespace}.svc")
            hosts += sorted(li.advertised_hosts.values())
    return hosts


def _pair(data: SecretData | None, cert: str = "tls.crt", key: str = "tls.key") -> certs.KeyPair | None:
    if not data or cert not in data or key not in data:
        return None
    return certs.KeyPair(bytes(data[cert]), bytes(data[key]))


def _ca(
    existing: SecretData | None, common_name: str, now: dt.datetime, renew_before_days: int
) -> certs.KeyPair:
    ca = _pair(existing, "ca.crt", "ca.key")
    if ca is None:
        return certs.new_ca(common_name, now)
    try:
        if certs.needs_renewal(ca.cert_pem, now, renew_before_days):
            return certs.renew_ca(ca, now)
    except ValueError:  # unreadable: a new CA (its leaves are re-issued below)
        return certs.new_ca(common_name, now)
    return ca


def plan(
    cluster: str,
    namespace: str,
    spec: ClusterSpec,
    existing: Mapping[str, SecretData | None],
    now: dt.datetime,
) -> dict[str, dict[str, bytes]]:
    """Desired data of the four Secrets, by name; `existing`: their observed data (None: missing)."""
    c = spec.certificates
    cca = _ca(existing.get(cluster_ca(cluster)), f"{cluster} cluster CA", now, c.renew_before_days)
    kca = _ca(existing.get(clients_ca(cluster)), f"{cluster} clients CA", now, c.renew_before_days)
    bundle = cca.cert_pem + kca.cert_pem
    hosts = broker_hosts(cluster, namespace, spec)
    broker = _pair(existing.get(broker_tls(cluster)))
    if not certs.leaf_is_current(broker, cca, now, hosts=hosts, renew_before_days=c.renew_before_days):
        broker = certs.issue(cca, f"{cluster}-broker", now, hosts=hosts, validity_days=c.validity_days)
    op = _pair(existing.get(operator_tls(cluster)))
    if not certs.leaf_is_current(op, cca, now, renew_before_days=c.renew_before_days):
        op = certs.issue(cca, f"{cluster}-operator", now, server=False, validity_days=c.validity_days)
    assert broker is not None and op is not None
    return {
        cluster_ca(cluster): {"ca.crt": cca.cert_pem, "ca.key": cca.key_pem},
        clients_ca(cluster): {"ca.crt": kca.cert_pem, "ca.key": kca.key_pem},
        broker_tls(cluster): {"tls.crt": broker.cert_pem, "tls.key": broker.key_pem, "ca.crt": bundle},
        operator_tls(cluster): {"tls.crt": op.cert_pem, "tls.key": op.key_pem, "ca.crt": cca.cert_pem},
    }


def secret(name: str, namespace: str, cluster: str, data: Mapping[str, bytes]) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace, "labels": names.labels(cluster, names.BROKER)},
        "data": {k: base64.b64encode(v).decode() for k, v in sorted(data.items())},
    }


def secret_data(obj: Mapping[str, Any] | None) -> dict[str, bytes] | None:
    """An observed Secret's data, decoded (None: no Secret)."""
    if obj is None:
        return None
    return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}


def secrets(
    cluster: str,
    namespace: str,
    spec: ClusterSpec,
    existing: Mapping[str, SecretData | None],
    now: dt.datetime,
) -> list[Manifest]:
    """The certificate Secrets of a secured Cluster whose certificates the operator makes (none
    otherwise: see `certificates` for cert-manager)."""
    if not spec.secured or spec.certificates.issuer != "operator":
        return []
    desired = plan(cluster, namespace, spec, existing, now)
    return [secret(n, namespace, cluster, d) for n, d in desired.items()]


def names_of(cluster: str) -> list[str]:
    return [cluster_ca(cluster), clients_ca(cluster), broker_tls(cluster), operator_tls(cluster)]


def admin_connection(
    cluster: str,
    namespace: str,
    spec: ClusterSpec,
    operator_tls: Mapping[str, bytes] | None,
    template: str,
    verify_hostname: bool = True,
) -> tuple[str, dict[str, str] | None]:
    """How the operator reaches a cluster: the replication listener with its own certificate when the
    cluster is secured (it is a super user there), else the plain bootstrap. None: not ready yet."""
    if not spec.secured:
        return template.format(name=cluster, namespace=namespace, port=spec.listener.port), None
    bootstrap = template.format(name=cluster, namespace=namespace, port=spec.replication_port)
    if operator_tls is None or "tls.crt" not in operator_tls:
        return bootstrap, {}
    return bootstrap, {
        "security.protocol": "SSL",
        "ssl.ca.pem": operator_tls["ca.crt"].decode(),
        "ssl.certificate.pem": operator_tls["tls.crt"].decode(),
        "ssl.key.pem": operator_tls["tls.key"].decode(),
        # Off only where the bootstrap template points outside Kubernetes' names (tests).
        "ssl.endpoint.identification.algorithm": "https" if verify_hostname else "none",
    }


# -- cert-manager (spec.certificates.issuer: cert-manager) ------------------------------------------
# The operator asks cert-manager for the brokers' and its own certificate (Certificate resources whose
# Secrets have the same names and keys as the operator's own: tls.crt, tls.key, ca.crt), so the broker
# pods are built the same way. cert-manager renews them; brokers reload the files. The issuer's CA is
# the one brokers trust, for brokers and for User client certificates alike (those are Certificates of
# the same issuer too).
CERT_MANAGER_API = "cert-manager.io/v1"


def certificate(
    name: str,
    namespace: str,
    cluster: str,
    spec: ClusterSpec,
    common_name: str,
    *,
    hosts: list[str] | None = None,
    server: bool = True,
) -> Manifest:
    c = spec.certificates
    body: dict[str, Any] = {
        "secretName": name,
        "commonName": common_name,
        "duration": f"{c.validity_days * 24}h",
        "renewBefore": f"{c.renew_before_days * 24}h",
        "usages": ["digital signature", "key encipherment", "client auth"] + ["server auth"] * server,
        "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
        "issuerRef": {
            "name": c.cert_manager_issuer,
            "kind": c.cert_manager_issuer_kind,
            "group": "cert-manager.io",
        },
    }
    if hosts:
        body["dnsNames"] = hosts
    return {
        "apiVersion": CERT_MANAGER_API,
        "kind": "Certificate",
        "metadata": {"name": name, "namespace": namespace, "labels": names.labels(cluster, names.BROKER)},
        "spec": body,
    }


def certificates(cluster: str, namespace: str, spec: ClusterSpec) -> list[Manifest]:
    """The Certificates of a secured Cluster whose certificates come from cert-manager (none otherwise)."""
    if not spec.secured or spec.certificates.issuer != "cert-manager":
        return []
    hosts = [h for h in broker_hosts(cluster, namespace, spec) if not _is_ip(h)]
    return [
        certificate(broker_tls(cluster), namespace, cluster, spec, f"{cluster}-broker", hosts=hosts),
        certificate(operator_tls(cluster), namespace, cluster, spec, f"{cluster}-operator", server=False),
    ]


def _is_ip(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
