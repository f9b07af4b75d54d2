"""Kafka's ACL model: resource patterns, access control entries, the filters of DescribeAcls and
DeleteAcls, and what CreateAcls accepts. Pure data and matching; storage is the broker's business.

Codes are the wire values of Kafka's enums (ResourceType, PatternType, AclOperation, AclPermissionType).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource
WILDCARD = "*"  # a literal resource name, principal or host that matches every one

# What each resource type supports (Kafka's AclEntry.supportedOperations): KIP-430's authorized operations.
SUPPORTED: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset(
        {
            Operation.READ,
            Operation.WRITE,
            Operation.CREATE,
            Operation.DELETE,
            Operation.ALTER,
            Operation.DESCRIBE,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(
        {
            Operation.READ,
            Operation.DESCRIBE,
            Operation.DELETE,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
        }
    ),
    ResourceType.CLUSTER: frozenset(
        {
            Operation.CREATE,
            Operation.CLUSTER_ACTION,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
            Operation.IDEMPOTENT_WRITE,
            Operation.ALTER,
            Operation.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.DESCRIBE, Operation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({Operation.DESCRIBE}),
    ResourceType.USER: frozenset({Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS}),
}


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType  # LITERAL or PREFIXED once stored

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this stored pattern covers the concrete resource (type, name)."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD


@dataclass(frozen=True, slots=True)
class AccessEntry:
    principal: str  # "User:alice", or "User:*"
    host: str  # an address, or "*"
    operation: Operation
    permission: Permission

    def to_doc(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation.name,
            "permission": self.permission.name,
        }

    @classmethod
    def from_doc(cls, d: Mapping[str, Any]) -> AccessEntry:
        return cls(
            str(d["principal"]), str(d["host"]), Operation[d["operation"]], Permission[d["permission"]]
        )


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessEntry


# The ACLs of a cluster: the entries of each stored resource pattern.
AclTable = Mapping[ResourcePattern, frozenset[AccessEntry]]


class InvalidAcl(ValueError):
    """A binding CreateAcls must refuse (INVALID_REQUEST), with Kafka's reason."""


def check_new(binding: AclBinding) -> None:
    """Kafka's checks on an ACL to create (AclControlManager.validateNewAcl and the authorizer's)."""
    p, e = binding.pattern, binding.entry
    if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAcl(f"Invalid resourceType {p.resource_type.name}")
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid patternType {p.pattern_type.name}")
    if e.operation in (Operation.UNKNOWN, Operation.ANY):
        raise InvalidAcl(f"Invalid operation {e.operation.name}")
    if e.permission in (Permission.UNKNOWN, Permission.ANY):
        raise InvalidAcl(f"Invalid permissionType {e.permission.name}")
    if not p.name:
        raise InvalidAcl("Resource name should not be empty")
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    kind, sep, _ = e.principal.partition(":")
    if not sep or not kind:  # "User:" (an empty name) is a principal to Kafka
        raise InvalidAcl(f"Could not parse principal from `{e.principal}` (no colon is found)")
    if not e.host:
        raise InvalidAcl("Invalid host: it must not be empty (use * for any host)")


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A DescribeAcls or DeleteAcls filter; None for the name, principal and host matches any."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def invalid(self) -> str | None:
        """Why the filter cannot be used (Kafka refuses UNKNOWN anywhere), or None."""
        for label, value in (
            ("resourceType", self.resource_type),
            ("patternType", self.pattern_type),
            ("operation", self.operation),
            ("permissionType", self.permission),
        ):
            if value == 0:
                return f"Invalid {label} UNKNOWN in the filter"
        return None

    def matches_pattern(self, p: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and p.resource_type != self.resource_type:
            return False
        match self.pattern_type:
            case PatternType.ANY:
                return self.name is None or p.name == self.name
            case PatternType.MATCH:  # every stored pattern that would apply to a resource of that name
                if self.name is None:
                    return True
                if p.pattern_type == PatternType.PREFIXED:
                    return self.name.startswith(p.name)
                return p.name == self.name or p.name == WILDCARD
            case _:
                return p.pattern_type == self.pattern_type and (self.name is None or p.name == self.name)

    def matches_entry(self, e: AccessEntry) -> bool:
        return (
            (self.principal is None or e.principal == self.principal)
            and (self.host is None or e.host == self.host)
            and (self.operation == Operation.ANY or e.operation == self.operation)
            and (self.permission == Permission.ANY or e.permission == self.permission)
        )


def matching(table: AclTable, f: AclFilter) -> list[AclBinding]:
    """The stored bindings a filter selects, in a stable order."""
    found = [
        AclBinding(p, e)
        for p, entries in table.items()
        if f.matches_pattern(p)
        for e in entries
        if f.matches_entry(e)
    ]
    return sorted(found, key=_order)


def _order(b: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    p, e = b.pattern, b.entry
    return (p.resource_type, p.name, p.pattern_type, e.principal, e.host, e.operation, e.permission)


def table_of(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, frozenset[AccessEntry]]:
    out: dict[ResourcePattern, set[AccessEntry]] = {}
    for b in bindings:
        out.setdefault(b.pattern, set()).add(b.entry)
    return {p: frozenset(e) for p, e in out.items()}


def encode_entries(entries: Iterable[AccessEntry]) -> list[dict[str, Any]]:
    return [
        e.to_doc() for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission))
    ]


def decode_entries(docs: Iterable[Mapping[str, Any]]) -> frozenset[AccessEntry]:
    return frozenset(AccessEntry.from_doc(d) for d in docs)


# How a pattern is stored: (resource type, pattern type, name) by enum names, e.g. ("TOPIC", "LITERAL", "t").
StoredKey = tuple[str, str, str]


def key_of(p: ResourcePattern) -> StoredKey:
    return (p.resource_type.name, p.pattern_type.name, p.name)


def table_from_stored(
    stored: Mapping[StoredKey, Iterable[Mapping[str, Any]]],
) -> dict[ResourcePattern, frozenset[AccessEntry]]:
    table: dict[ResourcePattern, frozenset[AccessEntry]] = {}
    for (rtype, ptype, name), docs in stored.items():
        entries = decode_entries(docs)
        if entries:
            table[ResourcePattern(ResourceType[rtype], name, PatternType[ptype])] = entries
    return table
