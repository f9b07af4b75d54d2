"""How the operator reaches a cluster's Kafka admin API, the one way every reconciler uses: on a
secured cluster the replication listener with the operator's own certificate (a super user there, its
Secret read here), else the plain bootstrap (tls.admin_connection decides the address)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from . import tls
from .spec import ClusterSpec

A_co = TypeVar("A_co", covariant=True)


class SecretReader(Protocol):
    async def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None: ...


class AdminFor(Protocol[A_co]):
    """An admin client for a bootstrap address and client security settings (AdminPool.get)."""

    def __call__(self, bootstrap: str, security: Mapping[str, str] | None = None) -> A_co: ...


async def cluster_admin(
    admin_for: AdminFor[A_co],
    kube: SecretReader,
    cluster: str,
    namespace: str,
    spec: ClusterSpec,
    template: str,
    verify_hostname: bool = True,
) -> A_co:
    """The admin client of Cluster `cluster`, whose parsed spec is `spec`; `template` is the bootstrap
    address template ({name}, {namespace}, {port})."""
    secret = await kube.get("Secret", namespace, tls.operator_tls(cluster)) if spec.secured else None
    bootstrap, security = tls.admin_connection(
        cluster, namespace, spec, tls.secret_data(secret), template, verify_hostname
    )
    return admin_for(bootstrap, security)
