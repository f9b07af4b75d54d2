"""What handlers ask the authorizer, for the connection's principal and host: one call per check, as
Kafka's KafkaApis does (its AuthHelper). Without an authorizer (authorizer.class.name unset) every
check passes and KIP-430's authorized operations are all the resource type supports.
"""

from __future__ import annotations

from collections.abc import Iterable

from brook.broker.broker import Broker
from brook.protocol.errors import ErrorCode, KafkaError
from brook.security.acls import CLUSTER_NAME, Operation, ResourceType

from .context import CLIENT_HOST, PRINCIPAL

__all__ = [
    "CLUSTER_DENIED",
    "CLUSTER_NAME",
    "NOT_REQUESTED",
    "Operation",
    "ResourceType",
    "allowed",
    "allowed_cluster",
    "authorized_operations",
    "failed",
    "filter_allowed",
    "may_create_topic",
    "require",
    "require_cluster",
]

NOT_REQUESTED = -(2**31)  # the authorized_operations field's value when the client did not ask

_FAILED = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def allowed(broker: Broker, op: Operation, rtype: ResourceType, name: str = CLUSTER_NAME) -> bool:
    return broker.authorizer.authorize(PRINCIPAL.get(), CLIENT_HOST.get(), op, rtype, name)


def failed(rtype: ResourceType) -> ErrorCode:
    """The error Kafka answers when `rtype` is not authorized."""
    return _FAILED[rtype]


def require(broker: Broker, op: Operation, rtype: ResourceType, name: str = CLUSTER_NAME) -> None:
    """Raise the resource type's AUTHORIZATION_FAILED error unless allowed."""
    if not allowed(broker, op, rtype, name):
        raise KafkaError(_FAILED[rtype], f"{PRINCIPAL.get()} may not {op.name} {rtype.name.lower()} '{name}'")


def require_cluster(broker: Broker, op: Operation) -> None:
    require(broker, op, ResourceType.CLUSTER)


# The body of a response refused for want of a cluster permission (APIs with a top-level error code).
CLUSTER_DENIED = {
    "throttle_time_ms": 0,
    "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    "error_message": "the operation on the cluster is not authorized",
}


def allowed_cluster(broker: Broker, op: Operation) -> bool:
    return allowed(broker, op, ResourceType.CLUSTER)


def may_create_topic(broker: Broker, name: str) -> bool:
    """CREATE on the cluster or on the topic (Kafka checks both, cluster first)."""
    return allowed(broker, Operation.CREATE, ResourceType.CLUSTER) or allowed(
        broker, Operation.CREATE, ResourceType.TOPIC, name
    )


def filter_allowed(broker: Broker, op: Operation, rtype: ResourceType, names: Iterable[str]) -> set[str]:
    """The names among `names` the principal may `op` (one decision per distinct name)."""
    if not broker.authorizer.enabled:
        return set(names)
    return {n for n in set(names) if allowed(broker, op, rtype, n)}


def authorized_operations(
    broker: Broker, rtype: ResourceType, name: str, requested: object
) -> set[int] | int:
    """KIP-430: the bitfield of operations the principal may do on the resource, or NOT_REQUESTED."""
    if not requested:
        return NOT_REQUESTED
    return broker.authorizer.authorized_operations(PRINCIPAL.get(), CLIENT_HOST.get(), rtype, name)
