"""DescribeConfigs(BROKER): Kafka's names, sources and synonym chains for this broker's settings."""

from __future__ import annotations

import logging
from pathlib import Path

from brook.protocol.config_types import ConfigSource
from brook.settings.broker import BrokerSettings
from brook.settings.described import (
    TYPES,
    BrokerConfigEntry,
    ConfigValue,
    broker_configs,
    logger_levels,
)

SOURCE_DEFAULT, SOURCE_STATIC_BROKER = ConfigSource.DEFAULT_CONFIG, ConfigSource.STATIC_BROKER_CONFIG


def _by_name(entries: list[BrokerConfigEntry]) -> dict[str, BrokerConfigEntry]:
    return {e.name: e for e in entries}


def test_identity_is_static_and_defaults_are_default() -> None:
    s = BrokerSettings(node_id=3, port=9400, rack="r1", data_dir=Path("/data"), num_partitions=4)
    c = _by_name(broker_configs(s))
    for name, value in [
        ("broker.id", "3"),
        ("node.id", "3"),
        ("broker.rack", "r1"),
        ("log.dirs", "/data"),
        ("listeners", "PLAINTEXT://127.0.0.1:9400"),
        ("advertised.listeners", "PLAINTEXT://127.0.0.1:9400"),
        ("num.partitions", "4"),
    ]:
        assert (c[name].value, c[name].source) == (value, SOURCE_STATIC_BROKER), name
    assert c["num.partitions"].synonyms == (
        ConfigValue("num.partitions", "4", SOURCE_STATIC_BROKER),
        ConfigValue("num.partitions", "1", SOURCE_DEFAULT),
    )
    for name, value in [("default.replication.factor", "1"), ("message.max.bytes", "1048588")]:
        assert (c[name].value, c[name].source) == (value, SOURCE_DEFAULT), name
    assert c["offsets.topic.replication.factor"].config_type == TYPES["SHORT"]
    assert c["auto.create.topics.enable"].config_type == TYPES["BOOLEAN"]


def test_an_unset_rack_is_null() -> None:
    c = _by_name(broker_configs(BrokerSettings()))
    rack = c["broker.rack"]
    assert (rack.value, rack.source, rack.synonyms) == (None, SOURCE_DEFAULT, ())
    assert c["replica.selector.class"].value is None


def test_retention_synonyms_follow_kafka() -> None:
    c = _by_name(broker_configs(BrokerSettings()))
    assert (c["log.retention.ms"].value, c["log.retention.ms"].source) == (None, SOURCE_DEFAULT)
    assert c["log.retention.ms"].synonyms == ()  # only log.retention.hours is set (by default)
    assert c["log.retention.hours"].synonyms == (ConfigValue("log.retention.hours", "168", SOURCE_DEFAULT),)

    s = BrokerSettings(topic_defaults={"retention.ms": "60000", "max.message.bytes": "2000000"})
    c = _by_name(broker_configs(s))
    assert (c["log.retention.ms"].value, c["log.retention.ms"].source) == ("60000", SOURCE_STATIC_BROKER)
    assert c["log.retention.ms"].synonyms == (
        ConfigValue("log.retention.ms", "60000", SOURCE_STATIC_BROKER),
        ConfigValue("log.retention.hours", "168", SOURCE_DEFAULT),
    )
    assert c["log.retention.hours"].source == SOURCE_DEFAULT  # a more specific synonym does not count
    assert c["message.max.bytes"].value == "2000000"


def test_keys_select_configs() -> None:
    assert [e.name for e in broker_configs(BrokerSettings(), ["broker.rack", "nope"])] == ["broker.rack"]


def test_logger_levels_use_log4j_names() -> None:
    logging.getLogger("brook.test.levels").setLevel(logging.WARNING)
    levels = logger_levels()
    assert "root" in levels
    assert levels["brook.test.levels"] == "WARN"
