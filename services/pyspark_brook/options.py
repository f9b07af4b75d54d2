"""The source's and sink's options, parsed once, with Spark's Kafka connector names.

Spark hands options as a case-insensitive map of strings (`dict(options)` lower-cases every key), so
every name here is compared lower-cased. `kafka.*` options go to the Kafka client (confluent-kafka /
librdkafka) with the prefix removed, like Spark's Kafka connector does with the Java client.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EARLIEST = -2  # Spark's Kafka connector's JSON sentinels in startingOffsets / endingOffsets
LATEST = -1

# Client settings the source owns: a user value would break reading (offsets are driven by Spark).
_READER_OWNED = {"group.id", "enable.auto.commit", "auto.offset.reset", "enable.partition.eof"}


class BrookOptionError(ValueError):
    """An option is missing or malformed; the message names the option."""


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    low = raw.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise BrookOptionError(f"option {name}: expected true or false, got {raw!r}")


def _int(opts: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = opts.get(name.lower())
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise BrookOptionError(f"option {name}: expected an integer, got {raw!r}") from None


def client_config(opts: Mapping[str, str]) -> dict[str, Any]:
    """bootstrap.servers plus every `kafka.*` option, prefix removed."""
    conf: dict[str, Any] = {}
    for k, v in opts.items():
        if k.startswith("kafka."):
            conf[k[len("kafka.") :]] = v
    bootstrap = conf.get("bootstrap.servers") or opts.get("bootstrap.servers")
    if not bootstrap:
        raise BrookOptionError("option kafka.bootstrap.servers (or bootstrap.servers) is required")
    conf["bootstrap.servers"] = bootstrap
    return conf


# An offsets spec: "earliest", "latest", or {topic: {partition: offset}} with -2/-1 sentinels.
OffsetSpec = str | dict[str, dict[int, int]]


def parse_offsets(name: str, raw: str | None, default: str) -> OffsetSpec:
    if raw is None or raw.strip() == "":
        return default
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise BrookOptionError(
            f'option {name}: expected earliest, latest or JSON like {{"topic":{{"0":23}}}}: {e}'
        ) from None
    if not isinstance(data, dict):
        raise BrookOptionError(f"option {name}: the JSON must be an object of topics")
    # -2 and -1 are Spark's sentinels; any other negative (e.g. librdkafka's -1001 OFFSET_INVALID) is
    # no offset at all. endingOffsets takes no -2, as in Spark.
    allowed = (EARLIEST, LATEST) if name == "startingOffsets" else (LATEST,)
    out: dict[str, dict[int, int]] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise BrookOptionError(f"option {name}: topic {topic!r} must map partitions to offsets")
        try:
            offsets = {int(p): int(o) for p, o in parts.items()}
        except (TypeError, ValueError):
            raise BrookOptionError(
                f"option {name}: topic {topic!r}: partitions and offsets must be integers"
            ) from None
        for part, off in offsets.items():
            if off < 0 and off not in allowed:
                raise BrookOptionError(
                    f"option {name}: {topic}-{part}: {off} is not an offset "
                    f"(use a position >= 0, or {' / '.join(map(str, allowed))})"
                )
        out[str(topic)] = offsets
    return out


@dataclass(frozen=True)
class Subscription:
    """Which topics and partitions to read: exactly one of subscribe, subscribePattern, assign."""

    kind: str  # "subscribe" | "pattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[tuple[str, int], ...] = ()

    def describe(self) -> str:
        if self.kind == "subscribe":
            return "subscribe=" + ",".join(self.topics)
        if self.kind == "pattern":
            return "subscribePattern=" + self.pattern
        return "assign=" + ",".join(f"{t}-{p}" for t, p in self.assigned)

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "pattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


def parse_subscription(opts: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k, "").strip()]
    if len(given) != 1:
        raise BrookOptionError(
            "exactly one of the options subscribe, subscribePattern or assign is required"
            + (f" (got {', '.join(given)})" if given else "")
        )
    kind = given[0]
    raw = opts[kind].strip()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise BrookOptionError("option subscribe: no topic given")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(raw)
        except re.error as e:
            raise BrookOptionError(f"option subscribePattern: {e}") from None
        return Subscription("pattern", pattern=raw)
    try:
        data = json.loads(raw)
        assigned = tuple(sorted((str(t), int(p)) for t, ps in data.items() for p in ps))
    except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
        raise BrookOptionError('option assign: expected JSON like {"topic":[0,1]}') from None
    if not assigned:
        raise BrookOptionError("option assign: no partition given")
    return Subscription("assign", assigned=assigned)


@dataclass(frozen=True)
class ReadOptions:
    client: dict[str, Any]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool
    include_headers: bool
    max_offsets_per_trigger: int | None
    max_records_per_partition: int | None
    min_partitions: int | None
    commit_group_id: str | None  # None: do not publish progress as group offsets
    poll_timeout_ms: int
    read_timeout_ms: int
    fetch_batch: int  # messages per consume() call (small lists stay in cache: measured faster)
    arrow_batch: int  # rows per Arrow batch handed to Spark (several consume() lists)
    consumer_extra: dict[str, Any] = field(default_factory=dict)

    def consumer_config(self) -> dict[str, Any]:
        conf = {k: v for k, v in self.client.items() if k not in _READER_OWNED}
        conf.update(
            {
                "group.id": "pyspark-brook-reader",  # required by the client; never joined or committed
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
            }
        )
        defaults = {
            "fetch.max.bytes": 8 << 20,
            "max.partition.fetch.bytes": 4 << 20,
            "queued.max.messages.kbytes": 256 << 10,
            "fetch.wait.max.ms": 50,
            "fetch.queue.backoff.ms": 0,
        }
        for k, v in defaults.items():
            conf.setdefault(k, v)
        conf.update(self.consumer_extra)
        return conf


def parse_read_options(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    opts = _lower(options)
    client = client_config(opts)
    sub = parse_subscription(opts)
    starting = parse_offsets(
        "startingOffsets", opts.get("startingoffsets"), "latest" if streaming else "earliest"
    )
    ending = parse_offsets("endingOffsets", opts.get("endingoffsets"), "latest")
    if not streaming:
        if starting == "latest":
            raise BrookOptionError("option startingOffsets: latest is not valid for a batch query")
        if ending == "earliest":
            raise BrookOptionError("option endingOffsets: earliest is not valid for a batch query")
    elif "endingoffsets" in opts:
        raise BrookOptionError("option endingOffsets is for batch queries only")
    max_per_trigger = _int(opts, "maxOffsetsPerTrigger", None)
    if max_per_trigger is not None and max_per_trigger <= 0:
        raise BrookOptionError("option maxOffsetsPerTrigger must be positive")
    max_per_part = _int(opts, "maxRecordsPerPartition", None)
    if max_per_part is not None and max_per_part <= 0:
        raise BrookOptionError("option maxRecordsPerPartition must be positive")
    min_parts = _int(opts, "minPartitions", None)
    if min_parts is not None and min_parts <= 0:
        raise BrookOptionError("option minPartitions must be positive")
    # Progress as group offsets (streaming only): kafka.group.id, or groupIdPrefix + the subscription.
    group: str | None = None
    if streaming and _bool(opts, "commitOffsetsToGroup", True):
        group = client.get("group.id")
        if not group:
            prefix = opts.get("groupidprefix", "spark-brook")
            digest = hashlib.sha1(sub.describe().encode()).hexdigest()[:12]
            group = f"{prefix}-{digest}"
    return ReadOptions(
        client=client,
        subscription=sub,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        max_offsets_per_trigger=max_per_trigger,
        max_records_per_partition=max_per_part,
        min_partitions=min_parts,
        commit_group_id=group,
        poll_timeout_ms=_int(opts, "pollTimeoutMs", 1000) or 1000,
        read_timeout_ms=_int(opts, "readTimeoutMs", 120_000) or 120_000,
        fetch_batch=_int(opts, "fetchBatchRecords", 2_000) or 2_000,
        arrow_batch=_int(opts, "arrowBatchRecords", 8_192) or 8_192,
    )


@dataclass(frozen=True)
class WriteOptions:
    client: dict[str, Any]
    topic: str | None
    exactly_once: bool
    sink_id: str | None
    batch_id: int | None  # batch writes: an idempotency key for the whole job
    commits_topic: str
    commits_replication: int | None
    include_sink_headers: bool
    crash_after_records: int | None  # test hook: os._exit in commit after producing this many records

    def producer_config(self) -> dict[str, Any]:
        conf = dict(self.client)
        for k in ("group.id",):
            conf.pop(k, None)
        conf.setdefault("partitioner", "murmur2_random")  # the Java client's key -> partition mapping
        conf.setdefault("linger.ms", 5)
        conf.setdefault("batch.size", 1 << 20)
        conf.setdefault("queue.buffering.max.messages", 1_000_000)
        conf.setdefault("queue.buffering.max.kbytes", 1 << 20)
        if self.exactly_once:
            conf["enable.idempotence"] = True
            conf["acks"] = "all"
        return conf


def parse_write_options(options: Mapping[str, str], streaming: bool) -> WriteOptions:
    opts = _lower(options)
    client = client_config(opts)
    exactly_once = _bool(opts, "exactlyOnce", True)
    sink_id = opts.get("sinkid") or None
    batch_id = _int(opts, "batchId", None)
    if streaming and exactly_once and not sink_id:
        checkpoint = opts.get("checkpointlocation")
        if not checkpoint:
            raise BrookOptionError(
                "an exactly-once streaming write needs option sinkId (or a checkpointLocation option to "
                "derive it from); set exactlyOnce=false for at-least-once"
            )
        sink_id = "ckpt-" + hashlib.sha1(checkpoint.rstrip("/").encode()).hexdigest()[:16]
    if not streaming and batch_id is not None and not sink_id:
        raise BrookOptionError("option batchId needs option sinkId")
    return WriteOptions(
        client=client,
        topic=opts.get("topic") or None,
        exactly_once=exactly_once,
        sink_id=sink_id,
        batch_id=batch_id,
        commits_topic=opts.get("sinkcommitstopic", "__brook_sink_commits"),
        commits_replication=_int(opts, "sinkCommitsReplicationFactor", None),
        include_sink_headers=True,
        crash_after_records=_int(opts, "brook.test.crashAfterRecords", None),
    )
