"""The authorized operations (KIP-430) that Metadata, DescribeCluster and DescribeGroups report when a
client asks: Brook has no authorizer, so, as Kafka without one, every operation the resource type
supports is allowed (Kafka 4's AclEntry.supportedOperations)."""

from __future__ import annotations

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

TOPIC = frozenset({READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS})
GROUP = frozenset({READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS})
CLUSTER = frozenset(
    {CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE}
)

NOT_REQUESTED = -(2**31)  # the field's value when the client did not ask


def authorized_operations(resource: frozenset[int], requested: object) -> set[int] | int:
    """The bitfield value for `resource`'s operations, or NOT_REQUESTED."""
    return set(resource) if requested else NOT_REQUESTED
