"""The typed spec of a `User` resource (Strimzi's KafkaUser, in Brook's words), with the CRD's defaults.

A User names a Cluster, how it authenticates (scram-sha-512: the operator makes a password; tls: a
client certificate of the cluster's clients CA), its ACLs and its quotas. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .spec import DNS_LABEL, SpecError, _Reader

USER_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,64}$")
RESOURCE_TYPES = ("topic", "group", "cluster", "transactionalId")
PATTERN_TYPES = ("literal", "prefix")
# Kafka's operation names, in the spelling of Strimzi's KafkaUser (and Kafka's AclOperation).
OPERATIONS = (
    "All",
    "Read",
    "Write",
    "Create",
    "Delete",
    "Alter",
    "Describe",
    "ClusterAction",
    "DescribeConfigs",
    "AlterConfigs",
    "IdempotentWrite",
)


@dataclass(frozen=True, slots=True, order=True)
class AclRule:
    """One Kafka ACL of the user: (resource type, name, pattern), an operation, allow or deny, host."""

    resource_type: str
    resource_name: str
    pattern_type: str
    operation: str
    permission: str = "allow"
    host: str = "*"


@dataclass(frozen=True, slots=True)
class Quotas:
    producer_byte_rate: int | None = None
    consumer_byte_rate: int | None = None
    request_percentage: int | None = None

    def as_kafka(self) -> dict[str, float | None]:
        """Kafka's quota keys; None removes a quota."""
        return {
            "producer_byte_rate": None if self.producer_byte_rate is None else float(self.producer_byte_rate),
            "consumer_byte_rate": None if self.consumer_byte_rate is None else float(self.consumer_byte_rate),
            "request_percentage": None if self.request_percentage is None else float(self.request_percentage),
        }


@dataclass(frozen=True, slots=True)
class UserSpec:
    cluster: str
    username: str
    authentication: str  # scram-sha-512 | tls
    acls: tuple[AclRule, ...] = ()
    quotas: Quotas = field(default_factory=Quotas)

    @property
    def principal(self) -> str:
        """The principal the brokers see: SCRAM's user name, or the client certificate's subject."""
        return f"User:CN={self.username}" if self.authentication == "tls" else f"User:{self.username}"


def parse_user(name: str, spec: Mapping[str, Any] | None) -> UserSpec:
    """The typed spec of a User named `name` (its Kafka user name); raises SpecError listing problems."""
    r = _Reader()
    s: Mapping[str, Any] = spec or {}
    p = "spec"
    if not USER_NAME.match(name):
        r.errors.append(f"user name '{name}' may hold only letters, digits, '.', '_' and '-' (at most 64)")
    cluster = r.str_(s, "cluster", p, pattern=DNS_LABEL)
    if cluster is None and "cluster" not in s:
        r.errors.append(f"{p}.cluster is required")
    auth = r.obj(s, "authentication", p) or {}
    auth_type = r.str_(auth, "type", f"{p}.authentication", "scram-sha-512", choices=("scram-sha-512", "tls"))
    acls: list[AclRule] = []
    authz = r.obj(s, "authorization", p) or {}
    raw = authz.get("acls") or []
    if not isinstance(raw, list):
        r.errors.append(f"{p}.authorization.acls must be a list")
        raw = []
    for i, a in enumerate(raw):
        ap = f"{p}.authorization.acls[{i}]"
        if not isinstance(a, Mapping):
            r.errors.append(f"{ap} must be an object")
            continue
        res = r.obj(a, "resource", ap) or {}
        rtype = r.str_(res, "type", f"{ap}.resource", choices=RESOURCE_TYPES)
        rname = r.str_(res, "name", f"{ap}.resource", "kafka-cluster" if rtype == "cluster" else None)
        pattern = r.str_(res, "patternType", f"{ap}.resource", "literal", choices=PATTERN_TYPES) or "literal"
        if rtype is None or rname is None:
            r.errors.append(f"{ap}.resource needs a type and (except cluster) a name")
            continue
        ops = a.get("operations")
        if not isinstance(ops, list) or not ops:
            r.errors.append(f"{ap}.operations must be a non-empty list")
            continue
        permission = r.str_(a, "type", ap, "allow", choices=("allow", "deny")) or "allow"
        host = r.str_(a, "host", ap, "*") or "*"
        for op in ops:
            if op not in OPERATIONS:
                r.errors.append(f"{ap}.operations: '{op}' is not one of {', '.join(OPERATIONS)}")
                continue
            acls.append(AclRule(rtype, rname, pattern, str(op), permission, host))
    q = r.obj(s, "quotas", p) or {}
    quotas = Quotas(
        producer_byte_rate=r.opt_int(q, "producerByteRate", f"{p}.quotas", 1),
        consumer_byte_rate=r.opt_int(q, "consumerByteRate", f"{p}.quotas", 1),
        request_percentage=r.opt_int(q, "requestPercentage", f"{p}.quotas", 1),
    )
    if r.errors:
        raise SpecError(r.errors)
    return UserSpec(
        cluster=cluster or "",
        username=name,
        authentication=auth_type or "scram-sha-512",
        acls=tuple(sorted(set(acls))),
        quotas=quotas,
    )
