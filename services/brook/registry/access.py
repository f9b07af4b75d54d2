"""Who may do what in the registry: Kafka's ACLs on the topic a subject belongs to, as Confluent's topic
ACL authorizer decides. A subject `orders-value` or `orders-key` (the serializers' default
TopicNameStrategy) belongs to topic `orders`; any other subject (RecordNameStrategy's `com.acme.Order`)
is checked as a topic of its own name, so a PREFIXED ACL covers a namespace. The ACLs that let a producer
write a topic let it register that topic's schemas, and those that let a consumer read it let it fetch
them: no second set of rules to keep in step, and kafka-acls.sh or `brook acl` manage both.

The registry is a Kafka client and imports nothing of the broker: the broker hands it `Authorize`, its
own authorizer's decision (super users, DENY before ALLOW, allow.everyone.if.no.acl.found included)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

from . import errors

# (principal "User:alice", client host, Kafka operation, resource type, resource name) -> allowed
Authorize = Callable[[str, str, str, str, str], bool]

ANONYMOUS = "User:ANONYMOUS"  # a request without basic auth, as Kafka names a PLAINTEXT client
_TOPIC_SUFFIXES = ("-key", "-value")


class Action(enum.Enum):
    """Confluent's registry operations, each with the Kafka operation it needs (on the subject's topic,
    or on the cluster for the global config and mode)."""

    SUBJECT_READ = ("Read", "DESCRIBE", "TOPIC")  # versions, lookup, schema ids, listings
    SUBJECT_WRITE = ("Write", "WRITE", "TOPIC")  # register, compatibility checks
    SUBJECT_DELETE = ("Delete", "DELETE", "TOPIC")
    SUBJECT_COMPATIBILITY_READ = ("ReadCompatibility", "DESCRIBE_CONFIGS", "TOPIC")  # config/mode
    SUBJECT_COMPATIBILITY_WRITE = ("WriteCompatibility", "ALTER_CONFIGS", "TOPIC")
    GLOBAL_COMPATIBILITY_READ = ("ReadGlobalCompatibility", "DESCRIBE_CONFIGS", "CLUSTER")
    GLOBAL_COMPATIBILITY_WRITE = ("WriteGlobalCompatibility", "ALTER_CONFIGS", "CLUSTER")

    def __init__(self, title: str, operation: str, resource_type: str) -> None:
        self.title = title
        self.operation = operation
        self.resource_type = resource_type


def topic_of(subject: str) -> str:
    """The topic whose ACLs govern `subject`."""
    for suffix in _TOPIC_SUFFIXES:
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


class Access:
    def __init__(self, authorize: Authorize) -> None:
        self._authorize = authorize

    def allowed(self, principal: str, host: str, action: Action, subject: str | None = None) -> bool:
        if action.resource_type == "CLUSTER":
            name = "kafka-cluster"  # Kafka's one name of the cluster resource
        else:
            assert subject is not None, action
            name = topic_of(subject)
        return self._authorize(principal, host, action.operation, action.resource_type, name)

    def check(self, principal: str, host: str, action: Action, subject: str | None = None) -> None:
        """Confluent's refusal when not allowed: 403 with error code 40301."""
        if not self.allowed(principal, host, action, subject):
            on = f"Subject: {subject}" if subject is not None else "the registry's global settings"
            raise errors.forbidden(f"User is denied operation {action.title} on {on}")

    def readable(self, principal: str, host: str, subjects: Iterable[str]) -> list[str]:
        """The subjects this principal may read, in their order (listings leave the others out, as
        Kafka's Metadata leaves out topics a client may not describe)."""
        return [s for s in subjects if self.allowed(principal, host, Action.SUBJECT_READ, s)]
