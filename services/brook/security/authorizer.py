"""Kafka's ACL authorizer: may this principal, from this host, do this operation on this resource?

Semantics of Kafka's StandardAuthorizer: super users may do everything; an ACL applies when its pattern
covers the resource (a literal name, the literal wildcard `*`, or a prefix), its principal is the
caller's or `User:*` and its host the caller's or `*`. Any applicable DENY for the operation (or ALL)
wins; else an applicable ALLOW decides, where allowing READ, WRITE, DELETE or ALTER implies DESCRIBE
and ALTER_CONFIGS implies DESCRIBE_CONFIGS. A resource no ACL covers at all (for anyone) is allowed
only with allow.everyone.if.no.acl.found.

Decisions are cached per (principal, host, operation, resource) until the ACLs change: produce and fetch
ask for every topic of every request.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from .acls import (
    SUPPORTED,
    WILDCARD,
    AccessEntry,
    AclTable,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)

log = logging.getLogger(__name__)

_IMPLIED: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}
_CACHE_LIMIT = 100_000
# Kafka's ACL authorizers (ZooKeeper's and KRaft's): either name turns Brook's on.
AUTHORIZERS = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)


@dataclass(slots=True)
class AuthorizerSettings:
    # authorizer.class.name: empty means no authorizer (everything allowed, ACL APIs SECURITY_DISABLED).
    class_name: str = ""
    super_users: frozenset[str] = field(default_factory=frozenset)  # super.users, "User:a;User:b"
    allow_everyone_if_no_acl_found: bool = False

    @property
    def enabled(self) -> bool:
        return bool(self.class_name)


def parse_super_users(value: str) -> frozenset[str]:
    """Kafka's super.users: principals separated by semicolons ("User:admin;User:broker")."""
    users = [u.strip() for u in value.split(";") if u.strip()]
    for u in users:
        kind, sep, name = u.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"super user {u!r} is not a principal like User:name")
    return frozenset(users)


class Authorizer:
    def __init__(self, settings: AuthorizerSettings) -> None:
        self.settings = settings
        self._table: AclTable = {}
        self._by_type: dict[ResourceType, list[tuple[ResourcePattern, frozenset[AccessEntry]]]] = {}
        self._cache: dict[tuple[str, str, Operation, ResourceType, str], bool] = {}
        self.generation = 0  # counts ACL changes (fetch sessions check their partitions again after one)

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def set_acls(self, table: AclTable) -> None:
        """The cluster's ACLs changed (a write here, or a watch event): forget every cached decision."""
        self._table = dict(table)
        by_type: dict[ResourceType, list[tuple[ResourcePattern, frozenset[AccessEntry]]]] = {}
        for p, entries in self._table.items():
            by_type.setdefault(p.resource_type, []).append((p, entries))
        self._by_type = by_type
        self._cache = {}
        self.generation += 1

    @property
    def acls(self) -> AclTable:
        return self._table

    def authorize(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        if not self.settings.enabled:
            return True
        key = (principal, host, op, rtype, name)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._decide(principal, host, op, rtype, name)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache = {}
            self._cache[key] = cached
            if not cached:
                log.debug("denied %s from %s: %s on %s:%s", principal, host, op.name, rtype.name, name)
        return cached

    def _decide(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        if principal in self.settings.super_users:
            return True
        allow_ops = _IMPLIED.get(op, frozenset({op}))
        any_acl = allowed = False
        for pattern, entries in self._by_type.get(rtype, ()):
            if not pattern.matches(rtype, name):
                continue
            any_acl = True
            for e in entries:
                if not _applies(e, principal, host):
                    continue
                if e.permission == Permission.DENY and (e.operation == op or e.operation == Operation.ALL):
                    return False
                if e.permission == Permission.ALLOW and (
                    e.operation in allow_ops or e.operation == Operation.ALL
                ):
                    allowed = True
        if not any_acl:
            return self.settings.allow_everyone_if_no_acl_found
        return allowed

    def authorized_operations(self, principal: str, host: str, rtype: ResourceType, name: str) -> set[int]:
        """KIP-430: the operations of the resource's type this principal may do on it."""
        return {int(op) for op in SUPPORTED[rtype] if self.authorize(principal, host, op, rtype, name)}

    def authorize_any(self, principal: str, host: str, op: Operation, rtype: ResourceType) -> bool:
        """Whether some resource of the type is allowed (Kafka's authorizeByResourceType, used for an
        idempotent producer without IDEMPOTENT_WRITE: it may write to some topic)."""
        if not self.settings.enabled or principal in self.settings.super_users:
            return True
        allow: list[ResourcePattern] = []
        deny: list[ResourcePattern] = []
        patterns = self._by_type.get(rtype, ())
        for pattern, entries in patterns:
            for e in entries:
                if not _applies(e, principal, host):
                    continue
                if e.permission == Permission.DENY and e.operation in (op, Operation.ALL):
                    deny.append(pattern)
                elif e.permission == Permission.ALLOW and e.operation in (op, Operation.ALL):
                    allow.append(pattern)
        if any(d.pattern_type == PatternType.LITERAL and d.name == WILDCARD for d in deny):
            return False
        for a in allow:
            covered = any(
                (d.pattern_type == PatternType.PREFIXED and a.name.startswith(d.name))
                or (
                    d.pattern_type == PatternType.LITERAL
                    and a.pattern_type == PatternType.LITERAL
                    and d.name == a.name
                )
                for d in deny
            )
            if not covered:
                return True
        return not patterns and self.settings.allow_everyone_if_no_acl_found


def _applies(e: AccessEntry, principal: str, host: str) -> bool:
    return (e.principal == principal or e.principal == "User:*") and (e.host == host or e.host == WILDCARD)
