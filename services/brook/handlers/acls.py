"""CreateAcls, DescribeAcls and DeleteAcls (KIP-140, prefixed patterns KIP-290): the cluster's ACLs,
kept with its metadata (etcd, or meta.json on a single node) and enforced by the authorizer.

Creating and deleting takes ALTER on the cluster, describing DESCRIBE; without an authorizer Kafka
answers SECURITY_DISABLED, and so does Brook.
"""

from __future__ import annotations

from typing import Any

from brook.broker.broker import Broker
from brook.metadata import AclKey
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey
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
    decode_entries,
    encode_entries,
    key_of,
    matching,
)

from .authorized import allowed
from .context import Body

_NO_AUTHORIZER = "no authorizer is configured on the broker (authorizer.class.name)"


def _enum(cls: Any, value: int) -> Any:
    """A wire code as its enum, unknown codes as UNKNOWN (Kafka's fromCode)."""
    try:
        return cls(value)
    except ValueError:
        return cls.UNKNOWN


def _refusal(broker: Broker, op: Operation) -> tuple[ErrorCode, str] | None:
    if not broker.authorizer.enabled:
        return ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER
    if not allowed(broker, op, ResourceType.CLUSTER):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"{op.name} on the cluster is not authorized"
    return None


async def handle_create_acls(broker: Broker, hdr: RequestHeader) -> Body | None:
    req = decode_request(ApiKey.CREATE_ACLS, hdr.api_version, hdr.body)
    refused = _refusal(broker, Operation.ALTER)
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for c in req.creations:
        if refused is not None:
            results.append({"error_code": refused[0], "error_message": refused[1]})
            continue
        binding = AclBinding(
            ResourcePattern(
                _enum(ResourceType, c.resource_type),
                c.resource_name or "",
                _enum(PatternType, c.resource_pattern_type),
            ),
            AccessEntry(
                c.principal or "",
                c.host or "",
                _enum(Operation, c.operation),
                _enum(Permission, c.permission_type),
            ),
        )
        try:
            check_new(binding)
        except InvalidAcl as e:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(e)})
            continue
        valid.append(binding)
        results.append({"error_code": 0, "error_message": None})

    def add(stored: dict[AclKey, list[dict[str, Any]]]) -> None:
        for b in valid:
            k = key_of(b.pattern)
            stored[k] = encode_entries(decode_entries(stored[k]) | {b.entry})

    if valid:
        try:
            await broker.update_acls(sorted({key_of(b.pattern) for b in valid}), add)
        except KafkaError as e:
            results = [
                {"error_code": e.code, "error_message": e.message} if r["error_code"] == 0 else r
                for r in results
            ]
    return messages.encode_response(
        ApiKey.CREATE_ACLS, hdr.api_version, {"throttle_time_ms": 0, "results": results}
    )


def _filter(f: Any) -> AclFilter:
    return AclFilter(
        _enum(ResourceType, f.resource_type_filter),
        f.resource_name_filter,
        _enum(PatternType, f.pattern_type_filter),
        f.principal_filter,
        f.host_filter,
        _enum(Operation, f.operation),
        _enum(Permission, f.permission_type),
    )


def _entry_doc(e: AccessEntry) -> dict[str, Any]:
    return {
        "principal": e.principal,
        "host": e.host,
        "operation": e.operation,
        "permission_type": e.permission,
    }


async def handle_describe_acls(broker: Broker, hdr: RequestHeader) -> Body | None:
    req = decode_request(ApiKey.DESCRIBE_ACLS, hdr.api_version, hdr.body)
    body: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": []}
    f = _filter(req)
    refused = _refusal(broker, Operation.DESCRIBE)
    if refused is None and (why := f.invalid()) is not None:
        refused = ErrorCode.INVALID_REQUEST, why
    if refused is not None:
        body.update(error_code=refused[0], error_message=refused[1])
    else:
        grouped: dict[ResourcePattern, list[dict[str, Any]]] = {}
        for b in matching(broker.authorizer.acls, f):
            grouped.setdefault(b.pattern, []).append(_entry_doc(b.entry))
        body["resources"] = [
            {
                "resource_type": p.resource_type,
                "resource_name": p.name,
                "pattern_type": p.pattern_type,
                "acls": acls,
            }
            for p, acls in grouped.items()
        ]
    return messages.encode_response(ApiKey.DESCRIBE_ACLS, hdr.api_version, body)


async def handle_delete_acls(broker: Broker, hdr: RequestHeader) -> Body | None:
    req = decode_request(ApiKey.DELETE_ACLS, hdr.api_version, hdr.body)
    refused = _refusal(broker, Operation.ALTER)
    filters = [_filter(f) for f in req.filters]
    results: list[dict[str, Any]] = []
    doomed: list[AclBinding] = []
    for f in filters:
        why = refused or ((ErrorCode.INVALID_REQUEST, w) if (w := f.invalid()) is not None else None)
        if why is not None:
            results.append({"error_code": why[0], "error_message": why[1], "matching_acls": []})
            continue
        found = matching(broker.authorizer.acls, f)
        doomed.extend(found)
        results.append(
            {
                "error_code": 0,
                "error_message": None,
                "matching_acls": [
                    {
                        "error_code": 0,
                        "error_message": None,
                        "resource_type": b.pattern.resource_type,
                        "resource_name": b.pattern.name,
                        "pattern_type": b.pattern.pattern_type,
                        **_entry_doc(b.entry),
                    }
                    for b in found
                ],
            }
        )

    def remove(stored: dict[AclKey, list[dict[str, Any]]]) -> None:
        for b in doomed:
            k = key_of(b.pattern)
            stored[k] = encode_entries(decode_entries(stored[k]) - {b.entry})

    if doomed:
        try:
            await broker.update_acls(sorted({key_of(b.pattern) for b in doomed}), remove)
        except KafkaError as e:
            results = [
                {**r, "error_code": e.code, "error_message": e.message, "matching_acls": []}
                if r["error_code"] == 0
                else r
                for r in results
            ]
    return messages.encode_response(
        ApiKey.DELETE_ACLS, hdr.api_version, {"throttle_time_ms": 0, "filter_results": results}
    )
