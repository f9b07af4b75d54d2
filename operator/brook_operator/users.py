"""The User reconcile flow: credentials in a Secret, the same credentials, ACLs and quotas in the cluster.

One pass: parse the User and its Cluster; make or keep the User's Secret (scram-sha-512: a generated
password, kept for the User's lifetime; tls: a client certificate of the cluster's clients CA,
renewed inside the Cluster's renewBeforeDays); then, over the Kafka protocol, make the cluster agree
(SCRAM credential, the principal's ACLs, its quotas) and report it in the status. Deleting a User
removes its credential, ACLs and quotas (the Secret goes with its ownerReference).
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from . import GROUP, VERSION, certs, status, tls
from .admin_access import AdminFor, cluster_admin
from .facts import AdminError
from .kube import ApiError
from .resources import names
from .spec import ClusterSpec, Listener, SpecError, parse_cluster
from .user_spec import AclRule, Quotas, UserSpec, parse_user

log = logging.getLogger(__name__)
PASSWORD_BYTES = 24
SCRAM_ITERATIONS = 4096


class UserKube(Protocol):
    async def apply(self, manifest: Mapping[str, Any]) -> str: ...

    async def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None: ...

    async def delete(self, kind: str, namespace: str | None, name: str) -> bool: ...


class UserAdmin(Protocol):
    async def scram_users(self) -> set[str]: ...

    async def upsert_scram(self, user: str, password: str, iterations: int) -> None: ...

    async def delete_scram(self, user: str) -> None: ...

    async def acls_of(self, principal: str) -> set[AclRule]: ...

    async def create_acls(self, principal: str, rules: Iterable[AclRule]) -> None: ...

    async def delete_acls(self, principal: str, rules: Iterable[AclRule]) -> None: ...

    async def set_quotas(self, user: str, quotas: Quotas) -> None: ...


def owner_reference(name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "User",
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _listener_for(cspec: ClusterSpec, authentication: str) -> Listener | None:
    """The listener the User connects to: internal first (in-cluster applications), then external."""
    fits = [li for li in cspec.listeners if li.authentication == authentication]
    return next((li for li in fits if not li.external), fits[0] if fits else None)


def _bootstrap(cluster: str, namespace: str, li: Listener) -> str:
    if li.external:
        from .resources.listeners import external_bootstrap_service

        return f"{external_bootstrap_service(cluster, li.name)}.{namespace}.svc:{li.port}"
    return names.bootstrap_address(cluster, namespace, li.port)


def user_secret_data(
    user: UserSpec,
    cluster: str,
    namespace: str,
    li: Listener,
    existing: Mapping[str, bytes] | None,
    clients_ca: certs.KeyPair | None,
    cluster_ca_pem: bytes,
    now: dt.datetime,
    renew_before_days: int,
) -> dict[str, bytes] | None:
    """The Secret's data: kept as is while current. None: the clients CA does not exist yet."""
    common = {
        "bootstrap.servers": _bootstrap(cluster, namespace, li).encode(),
        "security.protocol": li.security_protocol.encode(),
    }
    if li.tls:
        common["ca.crt"] = cluster_ca_pem
    if user.authentication == "scram-sha-512":
        password = (existing or {}).get("password") or secrets.token_urlsafe(PASSWORD_BYTES).encode()
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user.username}" password="{password.decode()}";'
        )
        return {
            **common,
            "username": user.username.encode(),
            "password": password,
            "sasl.mechanism": b"SCRAM-SHA-512",
            "sasl.jaas.config": jaas.encode(),
        }
    if clients_ca is None:
        return None
    old = existing or {}
    leaf = None
    if "user.crt" in old and "user.key" in old:
        leaf = certs.KeyPair(old["user.crt"], old["user.key"])
    if not certs.leaf_is_current(leaf, clients_ca, now, renew_before_days=renew_before_days):
        leaf = certs.issue(clients_ca, user.username, now, server=False)
    assert leaf is not None
    return {**common, "user.crt": leaf.cert_pem, "user.key": leaf.key_pem}


def _not_ready(generation: Any, previous: Any, now: str, reason: str, message: str) -> dict[str, Any]:
    cond = status.Condition("Ready", "False", reason, message)
    return {
        "observedGeneration": generation,
        "conditions": status.merge_conditions(previous, [cond], now=now, generation=generation),
    }


async def reconcile_user(
    body: Mapping[str, Any],
    *,
    kube: UserKube,
    admin_for: AdminFor[UserAdmin],
    template: str,
    now: str,
    verify: bool = True,
) -> dict[str, Any]:
    """One pass over the User `body`; returns its new status."""
    meta = body.get("metadata") or {}
    name, namespace, uid = str(meta["name"]), str(meta["namespace"]), str(meta.get("uid", ""))
    generation = meta.get("generation")
    previous = (body.get("status") or {}).get("conditions")
    try:
        user = parse_user(name, body.get("spec"))
    except SpecError as e:
        return _not_ready(generation, previous, now, "InvalidSpec", "; ".join(e.errors))
    cluster_obj = await kube.get("Cluster", namespace, user.cluster)
    if cluster_obj is None:
        return _not_ready(generation, previous, now, "ClusterNotFound", f"no Cluster {user.cluster} here")
    try:
        cspec = parse_cluster(user.cluster, cluster_obj.get("spec"))
    except SpecError:
        return _not_ready(generation, previous, now, "ClusterInvalid", f"Cluster {user.cluster} is invalid")
    li = _listener_for(cspec, user.authentication)
    if li is None:
        return _not_ready(
            generation,
            previous,
            now,
            "NoListener",
            f"Cluster {user.cluster} has no listener with authentication {user.authentication}",
        )
    manifest: dict[str, Any]
    data: dict[str, bytes] = {}
    if cspec.certificates.issuer == "cert-manager" and user.authentication == "tls":
        # cert-manager makes the client certificate, from the issuer of the brokers' certificate.
        manifest = tls.certificate(name, namespace, user.cluster, cspec, user.username, server=False)
    else:
        clients_ca: certs.KeyPair | None = None
        if cspec.certificates.issuer == "cert-manager":  # the issuer's CA, from the brokers' Secret
            trusted = tls.secret_data(await kube.get("Secret", namespace, tls.broker_tls(user.cluster))) or {}
        else:
            ca_data = tls.secret_data(await kube.get("Secret", namespace, tls.clients_ca(user.cluster)))
            trusted = tls.secret_data(await kube.get("Secret", namespace, tls.cluster_ca(user.cluster))) or {}
            if ca_data and "ca.key" in ca_data:
                clients_ca = certs.KeyPair(ca_data["ca.crt"], ca_data["ca.key"])
        maybe = user_secret_data(
            user,
            user.cluster,
            namespace,
            li,
            await _secret(kube, namespace, name),
            clients_ca,
            trusted.get("ca.crt", b""),
            dt.datetime.fromisoformat(now),
            cspec.certificates.renew_before_days,
        )
        if maybe is None:
            return _not_ready(
                generation, previous, now, "Waiting", "the cluster's clients CA is not made yet"
            )
        data = maybe
        manifest = tls.secret(name, namespace, user.cluster, data)
    manifest["metadata"]["ownerReferences"] = [owner_reference(name, uid)]
    try:
        await kube.apply(manifest)
        admin = await cluster_admin(admin_for, kube, user.cluster, namespace, cspec, template, verify)
        if user.authentication == "scram-sha-512":
            await _scram(admin, user, data)
        await _agree(admin, user, cspec)
    except (ApiError, AdminError, OSError) as e:
        return _not_ready(generation, previous, now, "ReconcileFailed", str(e))
    cond = status.Condition("Ready", "True", "Ready", f"principal {user.principal}")
    return {
        "observedGeneration": generation,
        "conditions": status.merge_conditions(previous, [cond], now=now, generation=generation),
        "username": user.username,
        "principal": user.principal,
        "secret": name,
        "bootstrapServers": _bootstrap(user.cluster, namespace, li),
    }


async def _secret(kube: UserKube, namespace: str, name: str) -> dict[str, bytes] | None:
    return tls.secret_data(await kube.get("Secret", namespace, name))


async def _scram(admin: UserAdmin, user: UserSpec, data: Mapping[str, bytes]) -> None:
    if user.username not in await admin.scram_users():
        await admin.upsert_scram(user.username, data["password"].decode(), SCRAM_ITERATIONS)


async def _agree(admin: UserAdmin, user: UserSpec, cspec: ClusterSpec) -> None:
    if cspec.authorization.enabled or user.acls:
        current = await admin.acls_of(user.principal)
        desired = set(user.acls)
        if desired - current:
            await admin.create_acls(user.principal, sorted(desired - current))
        if current - desired:
            await admin.delete_acls(user.principal, sorted(current - desired))
    if user.quotas != Quotas():
        await admin.set_quotas(user.username, user.quotas)


async def delete_user(
    body: Mapping[str, Any],
    *,
    kube: UserKube,
    admin_for: AdminFor[UserAdmin],
    template: str,
    verify: bool = True,
) -> str:
    """Remove the User's credential, ACLs and quotas from its cluster; a message for the log."""
    meta = body.get("metadata") or {}
    name, namespace = str(meta["name"]), str(meta["namespace"])
    try:
        user = parse_user(name, body.get("spec"))
    except SpecError:
        return f"User {namespace}/{name} was invalid: nothing to remove"
    cluster_obj = await kube.get("Cluster", namespace, user.cluster)
    if cluster_obj is None:
        return f"Cluster {user.cluster} is gone: nothing to remove"
    try:
        cspec = parse_cluster(user.cluster, cluster_obj.get("spec"))
    except SpecError:
        return f"Cluster {user.cluster} is invalid: nothing removed"
    admin = await cluster_admin(admin_for, kube, user.cluster, namespace, cspec, template, verify)
    if user.authentication == "scram-sha-512" and user.username in await admin.scram_users():
        await admin.delete_scram(user.username)
    if cspec.authorization.enabled or user.acls:  # (a cluster without ACLs may not have the API)
        current = await admin.acls_of(user.principal)
        if current:
            await admin.delete_acls(user.principal, sorted(current))
    if user.quotas != Quotas():
        await admin.set_quotas(user.username, Quotas())
    await kube.delete("Secret", namespace, name)
    return f"removed User {user.principal} from Cluster {user.cluster}"
