"""`brook acl ...`: add, list, remove ACLs, as Kafka's kafka-acls.sh does: principals allowed or denied
operations from hosts on topics, groups, transactional ids or the cluster, by literal name or prefix
(CreateAcls, DescribeAcls, DeleteAcls; the brokers need an authorizer, `--authorizer-class-name`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Annotated, Any

import typer

from .common import DEFAULT_BOOTSTRAP as B
from .common import Bootstrap, ClientSettings, CommandError, Output, OutputOpt, admin, command, emit, result

app = typer.Typer(
    help="ACLs: add, list, remove (the brokers need an authorizer: --authorizer-class-name).",
    no_args_is_help=True,
)

_RESOURCE_NAMES = {
    "TOPIC": "Topic",
    "GROUP": "Group",
    "BROKER": "Cluster",
    "TRANSACTIONAL_ID": "TransactionalId",
}
CLUSTER = "kafka-cluster"  # the cluster resource's one name in Kafka

Topics = Annotated[list[str] | None, typer.Option("--topic", "-t", help="a topic, repeatable")]
Groups = Annotated[list[str] | None, typer.Option("--group", "-g", help="a consumer group, repeatable")]
TxnIds = Annotated[
    list[str] | None, typer.Option("--transactional-id", help="a transactional id, repeatable")
]
ClusterOpt = Annotated[bool, typer.Option("--cluster", help="the cluster resource")]
Operations = Annotated[
    list[str] | None,
    typer.Option("--operation", "-O", help="Read, Write, Describe, All, ... (Kafka's names), repeatable"),
]
Hosts = Annotated[list[str] | None, typer.Option("--host", help="a client address, repeatable (default *)")]


def _key(name: str) -> str:
    return re.sub(r"[-_ ]", "", name).lower()


def _spelled(op: Any) -> str:
    """Kafka's spelling of an operation (kafka-acls.sh --operation): IDEMPOTENT_WRITE -> IdempotentWrite."""
    return "".join(w.capitalize() for w in op.name.split("_"))


def _operations() -> list[Any]:
    from confluent_kafka.admin import AclOperation

    return [op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]


def _operation(name: str) -> Any:
    for op in _operations():
        if _key(op.name) == _key(name):
            return op
    raise CommandError(f"unknown operation '{name}': one of {', '.join(map(_spelled, _operations()))}", 2)


def _principal(p: str) -> str:
    kind, sep, name = p.partition(":")
    if not sep or not kind or not name:
        raise CommandError(f"principal '{p}' must be Type:name, e.g. User:alice or User:*", 2)
    return p


def _pattern_type(name: str, allowed: Sequence[str]) -> Any:
    from confluent_kafka.admin import ResourcePatternType

    if name.lower() not in allowed:
        raise CommandError(f"--pattern-type must be one of {', '.join(allowed)}, not '{name}'", 2)
    return ResourcePatternType[name.upper()]


def _resources(
    topics: Sequence[str] | None, groups: Sequence[str] | None, txn_ids: Sequence[str] | None, cluster: bool
) -> list[tuple[Any, str]]:
    from confluent_kafka.admin import ResourceType

    out = [(ResourceType.TOPIC, t) for t in topics or []]
    out += [(ResourceType.GROUP, g) for g in groups or []]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in txn_ids or []]
    if cluster:
        out.append((ResourceType.BROKER, CLUSTER))
    return out


def _role_operations(restype: Any, producer: bool, consumer: bool) -> list[str]:
    """kafka-acls.sh's --producer and --consumer: what each role needs on each kind of resource."""
    ops: list[str] = []
    name = restype.name
    if producer:
        ops += {"TOPIC": ["Write", "Describe", "Create"], "TRANSACTIONAL_ID": ["Write", "Describe"]}.get(
            name, ["IdempotentWrite"] if name == "BROKER" else []
        )
    if consumer:
        ops += {"TOPIC": ["Read", "Describe"], "GROUP": ["Read"]}.get(name, [])
    return ops


def _row(b: Any) -> dict[str, str]:
    return {
        "principal": b.principal,
        "permission": b.permission_type.name.capitalize(),
        "operation": _spelled(b.operation),
        "host": b.host,
        "resource_type": _RESOURCE_NAMES.get(b.restype.name, b.restype.name),
        "pattern_type": b.resource_pattern_type.name.lower(),
        "name": b.name,
    }


def _emit(output: Output, bindings: Iterable[Any]) -> None:
    rows = sorted(
        (_row(b) for b in bindings),
        key=lambda r: (r["resource_type"], r["name"], r["principal"], r["operation"]),
    )
    emit(
        output,
        rows,
        ["PRINCIPAL", "PERMISSION", "OPERATION", "HOST", "RESOURCE", "PATTERN", "NAME"],
        [tuple(r.values()) for r in rows],
    )


@app.command("add")
@command
def add(
    allow: Annotated[
        list[str] | None, typer.Option("--allow", help="a principal to allow, repeatable")
    ] = None,
    deny: Annotated[list[str] | None, typer.Option("--deny", help="a principal to deny, repeatable")] = None,
    operation: Operations = None,
    producer: Annotated[
        bool,
        typer.Option("--producer", help="Write, Describe, Create on topics (IdempotentWrite on --cluster)"),
    ] = False,
    consumer: Annotated[
        bool, typer.Option("--consumer", help="Read, Describe on topics; Read on groups")
    ] = False,
    host: Hosts = None,
    topic: Topics = None,
    group: Groups = None,
    transactional_id: TxnIds = None,
    cluster: ClusterOpt = False,
    pattern_type: Annotated[str, typer.Option("--pattern-type", help="literal or prefixed")] = "literal",
    bootstrap: Bootstrap = B,
    output: OutputOpt = Output.table,
    x: ClientSettings = None,
) -> None:
    """Allow or deny principals operations on resources (every combination of the options given)."""
    from confluent_kafka.admin import AclBinding, AclPermissionType, ResourcePatternType, ResourceType

    principals = [(_principal(p), AclPermissionType.ALLOW) for p in allow or []]
    principals += [(_principal(p), AclPermissionType.DENY) for p in deny or []]
    if not principals:
        raise CommandError("give a principal: --allow User:alice or --deny User:bob", 2)
    resources = _resources(topic, group, transactional_id, cluster)
    if not resources:
        raise CommandError("give a resource: --topic, --group, --transactional-id or --cluster", 2)
    if not operation and not producer and not consumer:
        raise CommandError("give --operation (e.g. Read, Write, All), --producer or --consumer", 2)
    pattern = _pattern_type(pattern_type, ("literal", "prefixed"))
    bindings = []
    for restype, name in resources:
        ops = list(operation or []) + _role_operations(restype, producer, consumer)
        for op in dict.fromkeys(_operation(o) for o in ops):
            for principal, permission in principals:
                for h in host or ["*"]:
                    # the cluster is one resource, named literally (Kafka refuses other patterns for it)
                    rpt = ResourcePatternType.LITERAL if restype is ResourceType.BROKER else pattern
                    bindings.append(AclBinding(restype, name, rpt, principal, h, op, permission))
    if not bindings:
        raise CommandError("--producer/--consumer give nothing for these resources: add --operation", 2)
    a = admin(bootstrap, x)  # referenced until its futures resolve
    for fut in a.create_acls(bindings).values():
        result(fut, "add ACL")
    _emit(output, bindings)


def _filters(
    topics: Sequence[str] | None,
    groups: Sequence[str] | None,
    txn_ids: Sequence[str] | None,
    cluster: bool,
    principal: str | None,
    operations: Sequence[str] | None,
    hosts: Sequence[str] | None,
    pattern_type: str,
    permission: str = "any",
) -> list[Any]:
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourceType

    pattern = _pattern_type(pattern_type, ("any", "match", "literal", "prefixed"))
    if permission.lower() not in ("any", "allow", "deny"):
        raise CommandError(f"--permission must be allow, deny or any, not '{permission}'", 2)
    resources: list[tuple[Any, Any]] = list(_resources(topics, groups, txn_ids, cluster))
    ops = [_operation(o) for o in operations or []] or [AclOperation.ANY]
    wanted: Any = _principal(principal) if principal else None  # None: any (the stubs say str)
    any_host: list[Any] = [None]
    return [
        AclBindingFilter(restype, name, pattern, wanted, h, op, AclPermissionType[permission.upper()])
        for restype, name in resources or [(ResourceType.ANY, None)]
        for op in ops
        for h in hosts or any_host
    ]


PrincipalOpt = Annotated[str | None, typer.Option("--principal", help="only this principal's ACLs")]
PermissionOpt = Annotated[str, typer.Option("--permission", help="allow, deny or any")]


@app.command("list")
@command
def list_(
    topic: Topics = None,
    group: Groups = None,
    transactional_id: TxnIds = None,
    cluster: ClusterOpt = False,
    principal: PrincipalOpt = None,
    pattern_type: Annotated[
        str,
        typer.Option(
            "--pattern-type",
            help="any (exact names), match (also the prefixes and * that apply), literal, prefixed",
        ),
    ] = "any",
    permission: PermissionOpt = "any",
    bootstrap: Bootstrap = B,
    output: OutputOpt = Output.table,
    x: ClientSettings = None,
) -> None:
    """The ACLs of the resources given (all ACLs without one)."""
    a = admin(bootstrap, x)
    found: dict[Any, None] = {}
    for f in _filters(
        topic, group, transactional_id, cluster, principal, None, None, pattern_type, permission
    ):
        found.update(dict.fromkeys(result(a.describe_acls(f), "list ACLs")))
    if not found:
        _explain_empty(a)
    _emit(output, found)


def _explain_empty(a: Any) -> None:
    """librdkafka drops DescribeAcls' error (no authorizer, or DESCRIBE on the cluster refused) and
    returns no ACLs: an empty answer is checked against what the cluster says of both."""
    from confluent_kafka.admin import AclOperation, ConfigResource, ResourceType

    ops = result(a.describe_cluster(include_authorized_operations=True), "describe the cluster")
    if not {AclOperation.DESCRIBE, AclOperation.ALTER, AclOperation.ALL} & set(
        ops.authorized_operations or []
    ):
        raise CommandError("list ACLs: this principal may not DESCRIBE the cluster (its ACLs are hidden)")
    broker = ConfigResource(
        ResourceType.BROKER, str(ops.controller.id if ops.controller else ops.nodes[0].id)
    )
    configs = result(a.describe_configs([broker])[broker], "describe a broker")
    entry = configs.get("authorizer.class.name")
    if entry is not None and not entry.value:
        raise CommandError(
            "list ACLs: the cluster has no authorizer (start its brokers with --authorizer-class-name)"
        )


@app.command("remove")
@command
def remove(
    topic: Topics = None,
    group: Groups = None,
    transactional_id: TxnIds = None,
    cluster: ClusterOpt = False,
    principal: PrincipalOpt = None,
    operation: Operations = None,
    host: Hosts = None,
    pattern_type: Annotated[
        str, typer.Option("--pattern-type", help="any (exact names), match, literal or prefixed")
    ] = "any",
    permission: PermissionOpt = "any",
    all_: Annotated[bool, typer.Option("--all", help="every ACL of the cluster (no resource given)")] = False,
    bootstrap: Bootstrap = B,
    output: OutputOpt = Output.table,
    x: ClientSettings = None,
) -> None:
    """Remove the ACLs that match; prints the ones removed."""
    if not _resources(topic, group, transactional_id, cluster) and not all_:
        raise CommandError("give a resource (--topic, --group, --transactional-id, --cluster) or --all", 2)
    filters = _filters(
        topic, group, transactional_id, cluster, principal, operation, host, pattern_type, permission
    )
    a = admin(bootstrap, x)
    removed: dict[Any, None] = {}
    for fut in a.delete_acls(filters).values():
        removed.update(dict.fromkeys(result(fut, "remove ACLs")))
    _emit(output, removed)
