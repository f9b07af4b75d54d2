"""The broker's own configs as DescribeConfigs(BROKER) reports them: Kafka's names, types, defaults and
synonyms, with this broker's values.

A config is STATIC_BROKER_CONFIG when this broker sets it (its identity and listeners always; whatever
its server.properties, --override or flags name, with the value given; any other whose value differs from
Kafka's default) and DEFAULT_CONFIG otherwise; synonyms follow Kafka's
ConfigHelper (log.retention.ms, .minutes, .hours ...: the ones set, most specific first, starting at
the described name). The topic defaults' names can be altered (handlers/dynamic_configs.py), the
rest are read-only, as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from brook.config import TOPIC_CONFIGS
from brook.protocol.config_types import ConfigSource

from .broker import BrokerSettings
from .options import OPTIONS, Option

# ConfigSource ids (DescribeConfigs v1+).
# ConfigType ids (DescribeConfigs v3+).
TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7, "CLASS": 8}


@dataclass(frozen=True, slots=True)
class BrokerConfigDef:
    name: str
    type: str  # a key of TYPES
    default: str | None  # Kafka's default; None: unset (null)
    doc: str


def _d(name: str, type_: str, default: str | None, doc: str) -> BrokerConfigDef:
    return BrokerConfigDef(name, type_, default, doc)


_LONG_MAX = str(2**63 - 1)
DEFS: dict[str, BrokerConfigDef] = {
    d.name: d
    for d in (
        _d("advertised.listeners", "STRING", None, "listeners clients are told to connect to"),
        _d("authorizer.class.name", "STRING", "", "the authorizer checking ACLs (empty: none, all allowed)"),
        _d("auto.create.topics.enable", "BOOLEAN", "true", "create a topic when a client asks for it"),
        _d("broker.id", "INT", "-1", "this broker's id"),
        _d("broker.rack", "STRING", None, "this broker's rack, for rack-aware placement and fetching"),
        _d("compression.type", "STRING", "producer", "compression of stored batches"),
        _d(
            "connections.max.reauth.ms",
            "LONG",
            "0",
            "SASL session lifetime before re-authentication (KIP-368)",
        ),
        _d("default.replication.factor", "INT", "1", "replication factor of automatically created topics"),
        _d("group.initial.rebalance.delay.ms", "INT", "3000", "wait for members before a first rebalance"),
        _d("group.min.session.timeout.ms", "INT", "6000", "smallest session timeout a member may ask for"),
        _d("listeners", "STRING", "PLAINTEXT://:9092", "addresses the broker listens on"),
        _d("log.cleaner.backoff.ms", "LONG", "15000", "sleep between compaction passes"),
        _d("log.cleaner.delete.retention.ms", "LONG", "86400000", "how long tombstones survive compaction"),
        _d("log.cleaner.min.cleanable.ratio", "DOUBLE", "0.5", "dirty ratio that triggers the cleaner"),
        _d(
            "log.cleaner.max.compaction.lag.ms",
            "LONG",
            _LONG_MAX,
            "longest a record stays uncompacted",
        ),
        _d("log.roll.jitter.ms", "LONG", "0", "random time taken from log.roll.ms per segment"),
        _d("log.segment.delete.delay.ms", "LONG", "60000", "wait before deleting a removed segment's files"),
        _d(
            "log.message.timestamp.before.max.ms",
            "LONG",
            _LONG_MAX,
            "oldest CreateTime timestamp accepted, relative to the broker's clock",
        ),
        _d(
            "log.message.timestamp.after.max.ms",
            "LONG",
            _LONG_MAX,
            "furthest future CreateTime timestamp accepted, relative to the broker's clock",
        ),
        _d("log.cleaner.min.compaction.lag.ms", "LONG", "0", "records younger than this are not compacted"),
        _d("log.cleanup.policy", "LIST", "delete", "default cleanup policy of topics"),
        _d("log.dirs", "STRING", None, "directories holding the partition logs"),
        _d("log.flush.interval.messages", "LONG", _LONG_MAX, "fsync after this many records"),
        _d("log.flush.interval.ms", "LONG", None, "fsync when the oldest unflushed record is this old"),
        _d("log.flush.scheduler.interval.ms", "LONG", _LONG_MAX, "how often the flusher checks logs"),
        _d("log.index.interval.bytes", "INT", "4096", "bytes between two offset-index entries"),
        _d("log.index.size.max.bytes", "INT", "10485760", "maximum size of an offset index"),
        _d("log.message.timestamp.type", "STRING", "CreateTime", "CreateTime or LogAppendTime"),
        _d("log.retention.bytes", "LONG", "-1", "partition size above which old segments are deleted"),
        _d("log.retention.check.interval.ms", "LONG", "300000", "how often retention is applied"),
        _d("log.retention.hours", "INT", "168", "hours to keep a segment (log.retention.ms wins)"),
        _d("log.retention.minutes", "INT", None, "minutes to keep a segment (log.retention.ms wins)"),
        _d("log.retention.ms", "LONG", None, "milliseconds to keep a segment; -1 keeps forever"),
        _d("log.roll.hours", "INT", "168", "segment age at which a new one is rolled (hours)"),
        _d("log.roll.ms", "LONG", None, "segment age at which a new one is rolled"),
        _d("log.segment.bytes", "INT", "1073741824", "segment size at which a new one is rolled"),
        _d("message.max.bytes", "INT", "1048588", "largest record batch accepted"),
        _d("min.insync.replicas", "INT", "1", "acks=all fails below this many in-sync replicas"),
        _d("node.id", "INT", None, "this node's id"),
        _d("num.partitions", "INT", "1", "partitions of automatically created topics"),
        _d("offsets.retention.check.interval.ms", "LONG", "600000", "how often stale offsets expire"),
        _d("offsets.retention.minutes", "INT", "10080", "how long an empty group's offsets are kept"),
        _d("offsets.topic.num.partitions", "INT", "50", "partitions of __consumer_offsets"),
        _d("offsets.topic.replication.factor", "SHORT", "3", "replication factor of __consumer_offsets"),
        _d("producer.id.expiration.ms", "INT", "86400000", "an idle producer id is forgotten after this"),
        _d(
            "producer.id.expiration.check.interval.ms",
            "INT",
            "600000",
            "how often idle producer ids are looked for",
        ),
        _d("replica.lag.time.max.ms", "LONG", "30000", "a follower this far behind leaves the ISR"),
        _d("replica.selector.class", "STRING", None, "chooses the replica a consumer fetches from (KIP-392)"),
        _d("socket.request.max.bytes", "INT", "104857600", "largest request accepted"),
        _d(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "INT",
            "10000",
            "how often transactions open longer than their timeout are aborted",
        ),
        _d("transaction.max.timeout.ms", "INT", "900000", "largest transaction.timeout.ms allowed"),
        _d(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            "INT",
            "3600000",
            "how often expired transactional ids are removed",
        ),
        _d(
            "transactional.id.expiration.ms",
            "INT",
            "604800000",
            "a transactional id unused this long is forgotten",
        ),
        _d("transaction.state.log.num.partitions", "INT", "50", "partitions of __transaction_state"),
        _d(
            "transaction.state.log.replication.factor",
            "SHORT",
            "3",
            "replication factor of __transaction_state",
        ),
        _d("unclean.leader.election.enable", "BOOLEAN", "false", "elect a leader outside the ISR"),
    )
}


def _option_default(o: Option) -> str | None:
    if o.default is None or o.default == "":
        return None
    if isinstance(o.default, float) and o.default.is_integer():
        return str(int(o.default))
    return str(o.default)


# The options' Kafka names that the table above leaves out (security, limits, leader balance ...), with
# Brook's defaults.
DEFS.update(
    {
        o.kafka: _d(o.kafka, o.config_type, _option_default(o), o.help)
        for o in OPTIONS
        if o.kafka is not None and o.kafka not in DEFS
    }
)

# The broker name of each topic config Brook has (Kafka's ServerTopicConfigSynonyms).
TOPIC_TO_BROKER = {
    "cleanup.policy": "log.cleanup.policy",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "compression.type": "compression.type",
}
assert set(TOPIC_TO_BROKER) <= set(TOPIC_CONFIGS) and set(TOPIC_TO_BROKER.values()) <= set(DEFS)

# Kafka's synonym groups, most specific first.
_SYNONYMS = (
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.roll.ms", "log.roll.hours"),
)
# Set by any broker, so always STATIC_BROKER_CONFIG.
_ALWAYS_SET = ("broker.id", "node.id", "log.dirs", "listeners", "advertised.listeners")


@dataclass(frozen=True, slots=True)
class ConfigValue:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class BrokerConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    config_type: int
    doc: str
    synonyms: tuple[ConfigValue, ...]  # the whole chain; the handler sends it when asked


def synonyms_of(name: str) -> tuple[str, ...]:
    for group in _SYNONYMS:
        if name in group:
            return group
    return (name,)


def static_configs(s: BrokerSettings) -> dict[str, str]:
    """The broker configs this broker sets (as a server.properties would): identity, listeners, and every
    setting whose value is not Kafka's default."""
    values = {
        "broker.id": str(s.node_id),
        "node.id": str(s.node_id),
        "log.dirs": str(s.data_dir),
        "listeners": ",".join(f"{li.name}://{li.host}:{li.port}" for li in s.effective_listeners()),
        "advertised.listeners": ",".join(
            f"{li.name}://{li.advertised_host}:{li.advertised_port}" for li in s.effective_listeners()
        ),
        "connections.max.reauth.ms": str(s.sasl.connections_max_reauth_ms),
        "authorizer.class.name": s.authorizer.class_name,
        "auto.create.topics.enable": str(s.auto_create_topics).lower(),
        "num.partitions": str(s.num_partitions),
        "default.replication.factor": str(s.default_replication_factor),
        "socket.request.max.bytes": str(s.max_request_bytes),
        "replica.lag.time.max.ms": str(s.replica_lag_time_max_ms),
        "log.retention.check.interval.ms": str(s.retention_check_interval_ms),
        "log.flush.scheduler.interval.ms": str(s.flush_check_interval_ms),
        "log.cleaner.backoff.ms": str(s.cleaner_backoff_ms),
        "producer.id.expiration.ms": str(s.producer_id_expiration_ms),
        "producer.id.expiration.check.interval.ms": str(s.producer_id_expiration_check_interval_ms),
        "offsets.topic.num.partitions": str(s.groups.offsets_topic_partitions),
        "offsets.topic.replication.factor": str(s.groups.offsets_topic_replication_factor),
        "offsets.retention.minutes": str(s.groups.offsets_retention_minutes),
        "offsets.retention.check.interval.ms": str(s.groups.offsets_retention_check_interval_ms),
        "group.initial.rebalance.delay.ms": str(s.groups.initial_rebalance_delay_ms),
        "group.min.session.timeout.ms": str(s.groups.min_session_timeout_ms),
        "group.max.size": str(s.groups.classic_max_size),
        "transaction.state.log.num.partitions": str(s.transactions.state_log_partitions),
        "transaction.state.log.replication.factor": str(s.transactions.state_log_replication_factor),
        "transaction.max.timeout.ms": str(s.transactions.max_timeout_ms),
        "transactional.id.expiration.ms": str(s.transactions.id_expiration_ms),
        "transaction.remove.expired.transaction.cleanup.interval.ms": str(
            s.transactions.remove_expired_interval_ms
        ),
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(
            s.transactions.abort_check_interval_ms
        ),
    }
    if s.rack is not None:
        values["broker.rack"] = s.rack
    if s.replica_selector_class:
        values["replica.selector.class"] = s.replica_selector_class
    for topic_name, value in s.topic_defaults.items():
        broker_name = TOPIC_TO_BROKER.get(topic_name)
        # A default given as log.retention.hours is described under that name, not as log.retention.ms.
        if broker_name is not None and not any(n in s.static_config for n in synonyms_of(broker_name)):
            values[broker_name] = value
    values.update({k: v for k, v in s.static_config.items() if k in DEFS})
    return {
        k: v for k, v in values.items() if k in _ALWAYS_SET or k in s.static_config or v != DEFS[k].default
    }


def broker_configs(s: BrokerSettings, keys: Iterable[str] | None = None) -> list[BrokerConfigEntry]:
    """DescribeConfigs(BROKER <this id>): every config in DEFS (or those in `keys`), in name order."""
    static = static_configs(s)
    wanted = set(keys) if keys is not None else None
    out = []
    for name, d in sorted(DEFS.items()):
        if wanted is not None and name not in wanted:
            continue
        group = synonyms_of(name)
        static_, default = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG
        chain = [ConfigValue(n, static[n], static_) for n in group if n in static]
        chain += [ConfigValue(n, DEFS[n].default, default) for n in group if DEFS[n].default]
        while chain and chain[0].name != name:  # more specific synonyms do not describe this name
            chain.pop(0)
        value = static.get(name, d.default)
        source = chain[0].source if chain else ConfigSource.DEFAULT_CONFIG
        out.append(BrokerConfigEntry(name, value, source, TYPES[d.type], d.doc, tuple(chain)))
    return out


_LOG4J_LEVELS = {"CRITICAL": "FATAL", "WARNING": "WARN"}


def logger_levels() -> dict[str, str]:
    """DescribeConfigs(BROKER_LOGGER): the effective level of the root logger and of Brook's loggers,
    in log4j's names."""

    def level(logger: logging.Logger) -> str:
        name = logging.getLevelName(logger.getEffectiveLevel())
        return _LOG4J_LEVELS.get(name, name)

    out = {"root": level(logging.getLogger())}
    for name, logger in sorted(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and (name == "brook" or name.startswith("brook.")):
            out[name] = level(logger)
    return out
