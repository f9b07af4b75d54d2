"""The Kafka property names Brook takes in a server.properties (or a Cluster's `spec.config`), how each
value is checked, and those that only mean something in Kafka's own design, with why Brook ignores them.
Pure: the CLI (brook.cli_config) and the operator both use it."""

from __future__ import annotations

from brook.config import BROKER_TOPIC_SYNONYMS, validate_topic_config

from .options import BY_KAFKA, Option

_INT_MAX = 2**31 - 1
# The broker id is the pod's ordinal in a StatefulSet (BROOK_POD_NAME): a file shared by every pod
# cannot give it.
ID_KEYS = ("node.id", "broker.id")
OTHER_KEYS = frozenset({*ID_KEYS, "log.dir"})  # known, without an option of their own
# Retention and roll times in coarser units: the most specific one given wins, as in Kafka.
TIME_SYNONYMS = {
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
}
TIME_KEYS = frozenset(key for chain in TIME_SYNONYMS.values() for key, _ in chain)
# Kafka properties that have no meaning in Brook's design, by the reason given for ignoring them.
_IGNORED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Brook keeps its metadata in etcd (--etcd-endpoints), not ZooKeeper", ("zookeeper.",)),
    (
        "Brook has no KRaft quorum: its brokers elect a controller through etcd",
        (
            "process.roles",
            "controller.",
            "metadata.log.",
            "metadata.max.",
            "early.start.listeners",
            "cluster.id",
        ),
    ),
    (
        "Brook serves from one asyncio event loop: it has no thread pools",
        (
            "num.network.threads",
            "num.io.threads",
            "num.recovery.threads.per.data.dir",
            "num.replica.fetchers",
            "background.threads",
            "queued.max.requests",
        ),
    ),
    ("the kernel sizes Brook's socket buffers", ("socket.send.buffer.bytes", "socket.receive.buffer.bytes")),
    (
        "Brook's share groups take their settings from group configs (share.*), with Kafka's defaults",
        ("share.coordinator.", "group.share."),
    ),
    (
        "Brook's internal topics take the broker's min.insync.replicas",
        ("transaction.state.log.min.isr", "offsets.topic.min.isr"),
    ),
    ("secrets come from BROOK_SSL_KEY_PASSWORD, never a file Brook describes", ("ssl.key.password",)),
)


def must_be(o: Option) -> str:
    if o.choices:
        return "one of " + ", ".join(o.choices)
    if o.kind in ("int", "float"):
        what = "an integer" if o.kind == "int" else "a number"
        high = o.maximum if o.maximum is not None else (_INT_MAX if o.kind == "int" else None)
        low = o.minimum
        fmt = (lambda x: str(int(x))) if o.kind == "int" else str
        if low is not None and high is not None:
            return f"{what} from {fmt(low)} to {fmt(high)}"
        return f"{what} of at least {fmt(low)}" if low is not None else what
    return "a string"


def convert(o: Option, raw: str) -> tuple[object, str | None]:
    """(the typed value, None), or (None, what the value must be)."""
    value: object = raw.strip()
    if o.kind in ("int", "float"):
        try:
            n = int(raw) if o.kind == "int" else float(raw)
        except ValueError:
            return None, f"must be {must_be(o)}"
        high = o.maximum if o.maximum is not None else (_INT_MAX if o.kind == "int" else None)
        if (o.minimum is not None and n < o.minimum) or (high is not None and n > high):
            return None, f"must be {must_be(o)}"
        return n, None
    if o.kind == "bool":
        value = raw.strip().lower()
    if o.choices and value not in o.choices:
        return None, f"must be {must_be(o)}"
    return value, None


def ignored_reason(key: str) -> str | None:
    for reason, names in _IGNORED:
        if any(key == n or (n.endswith(".") and key.startswith(n)) for n in names):
            return reason
    return None


# Every name taken as a setting.
KNOWN = frozenset(BY_KAFKA) | frozenset(BROKER_TOPIC_SYNONYMS) | TIME_KEYS | OTHER_KEYS


def check(key: str, value: str) -> str | None:
    """Why `value` is refused for the known property `key` (the message says the range), or None."""
    if key in ("log.dirs", "log.dir") and len([d for d in value.split(",") if d.strip()]) != 1:
        return "Brook keeps one log directory per broker"
    if key in BY_KAFKA:
        return convert(BY_KAFKA[key], value)[1]
    if key in TIME_KEYS and key not in BROKER_TOPIC_SYNONYMS:
        return None if value.strip().lstrip("-").isdigit() else "must be an integer"
    if key in BROKER_TOPIC_SYNONYMS:
        topic = BROKER_TOPIC_SYNONYMS[key]
        err = validate_topic_config(topic, value)
        return None if err is None else err.replace(topic, key)
    if key in ID_KEYS:
        return None if value.strip().isdigit() else "must be an integer of at least 0"
    return None
