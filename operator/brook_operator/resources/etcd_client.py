"""Pure builders of how broker pods reach an external etcd with TLS and etcd users (spec.etcd.tls,
spec.etcd.auth): the Secrets mounted read-only and the BROOK_ETCD_* settings pointing at them.

The broker pods' contract (extends the one in broker.py): BROOK_ETCD_CACERT, BROOK_ETCD_CERT,
BROOK_ETCD_KEY (PEM files, read again at every reconnect, so a renewed certificate needs no restart),
BROOK_ETCD_USER and BROOK_ETCD_PASSWORD_FILE (the password as a mounted file, never in the
environment). The operator itself never talks to etcd: it administers brokers over Kafka's protocol.
"""

from __future__ import annotations

from typing import Any

from ..spec import ClusterSpec

DIR = "/etc/brook/etcd"
CA_DIR, CLIENT_DIR, AUTH_DIR = f"{DIR}/ca", f"{DIR}/client", f"{DIR}/auth"
_READ_ONLY = 0o440


def config(spec: ClusterSpec) -> dict[str, str]:
    """The ConfigMap entries (cluster-wide)."""
    e = spec.etcd
    env: dict[str, str] = {}
    if e is None:
        return env
    if e.tls is not None:
        if e.tls.ca is not None:
            env["BROOK_ETCD_CACERT"] = f"{CA_DIR}/{e.tls.ca.key}"
        if e.tls.client_secret is not None:
            env["BROOK_ETCD_CERT"] = f"{CLIENT_DIR}/tls.crt"
            env["BROOK_ETCD_KEY"] = f"{CLIENT_DIR}/tls.key"
    if e.auth is not None:
        env["BROOK_ETCD_USER"] = e.auth.user
        env["BROOK_ETCD_PASSWORD_FILE"] = f"{AUTH_DIR}/{e.auth.password.key}"
    return env


def _secret(volume: str, name: str, keys: list[str]) -> dict[str, Any]:
    return {
        "name": volume,
        "secret": {
            "secretName": name,
            "items": [{"key": k, "path": k} for k in keys],
            "defaultMode": _READ_ONLY,
        },
    }


def volumes(spec: ClusterSpec) -> list[dict[str, Any]]:
    e = spec.etcd
    out: list[dict[str, Any]] = []
    if e is None:
        return out
    if e.tls is not None and e.tls.ca is not None:
        out.append(_secret("etcd-ca", e.tls.ca.name, [e.tls.ca.key]))
    if e.tls is not None and e.tls.client_secret is not None:
        out.append(_secret("etcd-client", e.tls.client_secret, ["tls.crt", "tls.key"]))
    if e.auth is not None:
        out.append(_secret("etcd-auth", e.auth.password.name, [e.auth.password.key]))
    return out


def mounts(spec: ClusterSpec) -> list[dict[str, Any]]:
    paths = {"etcd-ca": CA_DIR, "etcd-client": CLIENT_DIR, "etcd-auth": AUTH_DIR}
    return [{"name": v["name"], "mountPath": paths[v["name"]], "readOnly": True} for v in volumes(spec)]
