"""etcd's data model as Brook's own types: keys and values, transaction conditions and operations,
watch events. Pure data, no aetcd: client.py turns them into etcd's messages and back."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


def prefix_end(prefix: bytes) -> bytes:
    """The range end that makes [prefix, end) exactly the keys starting with prefix."""
    b = bytearray(prefix)
    for i in reversed(range(len(b))):
        if b[i] < 0xFF:
            b[i] += 1
            return bytes(b[: i + 1])
    return b"\0"  # all keys from prefix on


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int  # writes since creation (etcd's per-key counter)
    lease: int  # 0: none


@dataclass(frozen=True, slots=True)
class RangeResult:
    kvs: list[KeyValue]
    revision: int  # the store's revision the range was read at


@dataclass(frozen=True, slots=True)
class Lease:
    id: int
    ttl: int
    # The event loop's time when the attempt that got the lease was sent: its TTL runs from no
    # earlier than that, however long the retries before it took.
    asked_at: float


class Target(Enum):
    VERSION = "version"
    CREATE = "create"
    MOD = "mod"
    VALUE = "value"


@dataclass(frozen=True, slots=True)
class Compare:
    """One condition of a transaction. A missing key has version/create/mod revision 0 and fails
    every VALUE comparison."""

    key: bytes
    target: Target
    op: str  # "==", "!=", "<", ">"
    operand: int | bytes

    @staticmethod
    def absent(key: bytes) -> Compare:
        return Compare(key, Target.CREATE, "==", 0)

    @staticmethod
    def exists(key: bytes) -> Compare:
        return Compare(key, Target.CREATE, ">", 0)

    @staticmethod
    def mod_revision(key: bytes, revision: int) -> Compare:
        """The key was last written at `revision` (0: the key does not exist)."""
        return Compare(key, Target.MOD, "==", revision)

    @staticmethod
    def value_is(key: bytes, value: bytes) -> Compare:
        return Compare(key, Target.VALUE, "==", value)


@dataclass(frozen=True, slots=True)
class Put:
    key: bytes
    value: bytes
    lease: int = 0


@dataclass(frozen=True, slots=True)
class Delete:
    key: bytes
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class Get:
    key: bytes
    prefix: bool = False


Op = Put | Delete | Get


@dataclass(frozen=True, slots=True)
class TxnResult:
    succeeded: bool
    revision: int  # the store's revision after the txn: the mod_revision of everything it wrote
    gets: list[list[KeyValue]] = field(default_factory=list)  # one list per Get op of the branch run


class EventType(Enum):
    PUT = "PUT"
    DELETE = "DELETE"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: EventType
    key: bytes
    value: bytes  # the new value; for a DELETE the value before it (b"" when unknown)
    revision: int  # the revision of the change
    create_revision: int = 0  # of the key (PUT only)
    version: int = 0  # 1 for the PUT that created the key
    resync: bool = False  # made up from a re-list after a compaction, see PrefixWatch
