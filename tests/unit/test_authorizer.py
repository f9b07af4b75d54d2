"""Kafka's authorization rules, decision by decision (brook.security.authorizer and acls)."""

from __future__ import annotations

import pytest

from brook.security.acls import (
    AccessEntry,
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    check_new,
    key_of,
    matching,
    table_from_stored,
    table_of,
)
from brook.security.authorizer import Authorizer, AuthorizerSettings, parse_super_users

ON = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(
    rtype: ResourceType,
    name: str,
    op: Operation,
    perm: Permission = ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    pattern: PatternType = LIT,
) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessEntry(principal, host, op, perm))


def authorizer(*bindings: AclBinding, supers: str = "", everyone: bool = False) -> Authorizer:
    a = Authorizer(AuthorizerSettings(ON, parse_super_users(supers), everyone))
    a.set_acls(table_of(bindings))
    return a


def ok(
    a: Authorizer,
    op: Operation,
    rtype: ResourceType,
    name: str,
    who: str = "User:alice",
    host: str = "10.0.0.1",
) -> bool:
    return a.authorize(who, host, op, rtype, name)


def test_without_an_authorizer_everything_is_allowed() -> None:
    a = Authorizer(AuthorizerSettings())
    assert ok(a, Operation.WRITE, T, "t") and ok(a, Operation.ALTER, C, "kafka-cluster")


def test_no_acl_means_denied_unless_allow_everyone() -> None:
    assert not ok(authorizer(), Operation.READ, T, "t")
    assert ok(authorizer(everyone=True), Operation.READ, T, "t")
    # An ACL for someone else on the resource: allow.everyone no longer applies.
    other = acl(T, "t", Operation.READ, principal="User:bob")
    assert not ok(authorizer(other, everyone=True), Operation.READ, T, "t")


def test_literal_prefixed_and_wildcard_patterns() -> None:
    a = authorizer(
        acl(T, "exact", Operation.READ),
        acl(T, "pre-", Operation.WRITE, pattern=PRE),
        acl(G, "*", Operation.READ),
    )
    assert ok(a, Operation.READ, T, "exact") and not ok(a, Operation.READ, T, "exact2")
    assert ok(a, Operation.WRITE, T, "pre-x") and not ok(a, Operation.WRITE, T, "pr")
    assert ok(a, Operation.READ, G, "any-group")
    assert not ok(a, Operation.WRITE, T, "exact")


def test_deny_wins_and_all_covers_every_operation() -> None:
    a = authorizer(
        acl(T, "t", Operation.ALL),
        acl(T, "t", Operation.WRITE, DENY),
        acl(T, "x", Operation.ALL, DENY, principal="User:*"),
        acl(T, "x", Operation.READ),
    )
    assert ok(a, Operation.READ, T, "t") and ok(a, Operation.ALTER_CONFIGS, T, "t")
    assert not ok(a, Operation.WRITE, T, "t")
    assert not ok(a, Operation.READ, T, "x")


def test_implied_describe() -> None:
    a = authorizer(acl(T, "t", Operation.READ), acl(T, "c", Operation.ALTER_CONFIGS))
    assert ok(a, Operation.DESCRIBE, T, "t")
    assert ok(a, Operation.DESCRIBE_CONFIGS, T, "c")
    assert not ok(a, Operation.DESCRIBE_CONFIGS, T, "t")
    # A DENY of DESCRIBE does not deny READ, only DESCRIBE itself.
    b = authorizer(acl(T, "t", Operation.READ), acl(T, "t", Operation.DESCRIBE, DENY))
    assert ok(b, Operation.READ, T, "t") and not ok(b, Operation.DESCRIBE, T, "t")


def test_principal_and_host_matching() -> None:
    a = authorizer(acl(T, "t", Operation.READ, principal="User:*", host="10.0.0.1"))
    assert ok(a, Operation.READ, T, "t", "User:bob", "10.0.0.1")
    assert not ok(a, Operation.READ, T, "t", "User:bob", "10.0.0.2")


def test_super_users() -> None:
    a = authorizer(acl(T, "t", Operation.ALL, DENY, principal="User:*"), supers="User:admin; User:broker")
    assert ok(a, Operation.WRITE, T, "t", "User:admin") and ok(
        a, Operation.CLUSTER_ACTION, C, "kafka-cluster", "User:broker"
    )
    assert not ok(a, Operation.WRITE, T, "t")
    with pytest.raises(ValueError):
        parse_super_users("admin")


def test_decisions_follow_acl_changes() -> None:
    a = authorizer()
    assert not ok(a, Operation.READ, T, "t")  # cached
    a.set_acls(table_of([acl(T, "t", Operation.READ)]))
    assert ok(a, Operation.READ, T, "t")


def test_authorized_operations() -> None:
    a = authorizer(acl(T, "t", Operation.WRITE))
    assert a.authorized_operations("User:alice", "h", T, "t") == {Operation.WRITE, Operation.DESCRIBE}


def test_authorize_any_topic() -> None:
    assert authorizer(acl(T, "pre-", Operation.WRITE, pattern=PRE)).authorize_any(
        "User:alice", "h", Operation.WRITE, T
    )
    covered = authorizer(acl(T, "t", Operation.WRITE), acl(T, "t", Operation.WRITE, DENY))
    assert not covered.authorize_any("User:alice", "h", Operation.WRITE, T)
    star = authorizer(acl(T, "t", Operation.WRITE), acl(T, "*", Operation.ALL, DENY))
    assert not star.authorize_any("User:alice", "h", Operation.WRITE, T)
    assert not authorizer().authorize_any("User:alice", "h", Operation.WRITE, T)


def test_create_checks() -> None:
    check_new(acl(T, "t", Operation.READ))
    for bad in (
        acl(ResourceType.ANY, "t", Operation.READ),
        acl(T, "t", Operation.ANY),
        acl(T, "t", Operation.READ, Permission.ANY),
        acl(T, "t", Operation.READ, pattern=PatternType.MATCH),
        acl(C, "other", Operation.ALTER),
        acl(T, "t", Operation.READ, principal="alice"),
        acl(T, "", Operation.READ),
    ):
        with pytest.raises(InvalidAcl):
            check_new(bad)


def test_filters() -> None:
    bindings = [
        acl(T, "t", Operation.READ),
        acl(T, "t-", Operation.WRITE, pattern=PRE),
        acl(G, "g", Operation.READ),
    ]
    table = table_of(bindings)
    any_ = Operation.ANY
    match = AclFilter(T, "t-1", PatternType.MATCH, None, None, any_, Permission.ANY)
    assert matching(table, match) == [bindings[1]]
    literal = AclFilter(ResourceType.ANY, None, LIT, "User:alice", None, any_, Permission.ANY)
    assert set(matching(table, literal)) == {bindings[0], bindings[2]}
    assert AclFilter(ResourceType.UNKNOWN, None, LIT, None, None, any_, Permission.ANY).invalid()


def test_stored_form_round_trips() -> None:
    b = acl(T, "t-", Operation.WRITE, DENY, pattern=PRE)
    stored = {key_of(b.pattern): [b.entry.to_doc()]}
    assert table_from_stored(stored) == table_of([b])
