"""The config tables: topic, dynamic broker and group configs are validated as Kafka does."""

from __future__ import annotations

import pytest

from brook.config import (
    TopicConfig,
    topic_defaults_of,
    validate_broker_config,
    validate_group_configs,
    validate_topic_config,
)


@pytest.mark.parametrize("codec", ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"])
def test_every_kafka_compression_type_is_accepted(codec: str) -> None:
    assert validate_topic_config("compression.type", codec) is None
    assert TopicConfig.from_strings({"compression.type": codec}).compression_type == codec


def test_unknown_compression_type_is_refused() -> None:
    assert validate_topic_config("compression.type", "brotli") is not None
    assert validate_topic_config("compression.type", "LZ4") is not None  # Kafka's names are lower case


def test_broker_configs() -> None:
    assert validate_broker_config("log.retention.ms", "60000") is None
    assert "log.retention.ms" in (validate_broker_config("log.retention.ms", "soon") or "")
    assert validate_broker_config("compression.type", "brotli") is not None
    assert validate_broker_config("num.partitions", "3") == "cannot update num.partitions dynamically"
    assert validate_broker_config("sasl.kerberos.min.time.before.relogin", "58000") is None  # kept, unused
    assert validate_broker_config("", "x") is not None


def test_group_configs() -> None:
    assert validate_group_configs({"consumer.session.timeout.ms": "50000"}) is None
    assert validate_group_configs({"consumer.session.timeout.ms": "1000"}) is not None  # below 45000
    assert validate_group_configs({"consumer.session.timeout.ms": "70000"}) is not None  # above 60000
    assert validate_group_configs({"no.such.config": "1"}) is not None
    slowest = {"share.heartbeat.interval.ms": "15000", "share.session.timeout.ms": "45000"}
    assert validate_group_configs(slowest) is None
    assert validate_group_configs({"consumer.heartbeat.interval.ms": "15000"}) is None
    equal = {"consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "45000"}
    assert validate_group_configs(equal) is not None  # also above the heartbeat's maximum


def test_topic_defaults_from_broker_configs() -> None:
    everyone = {"log.retention.ms": "1000", "compression.type": "gzip", "background.threads": "9"}
    mine = {"log.retention.ms": "2000"}
    assert topic_defaults_of(everyone, mine) == {"retention.ms": "2000", "compression.type": "gzip"}


def test_iceberg_topic_configs_are_checked_like_kafkas() -> None:
    ok = {
        "brook.iceberg.enabled": "true",
        "brook.iceberg.namespace": "lake_1",
        "brook.iceberg.table": "",  # the topic's name
        "brook.iceberg.commit.interval.ms": "100",
        "brook.iceberg.value.mode": "json",
        "brook.iceberg.partition.spec": "hour",
    }
    assert all(validate_topic_config(k, v) is None for k, v in ok.items())
    refused = {
        "brook.iceberg.enabled": "yes",
        "brook.iceberg.namespace": "",
        "brook.iceberg.table": "a.b",  # one level: a dot would be a namespace
        "brook.iceberg.commit.interval.ms": "99",
        "brook.iceberg.value.mode": "avro",
        "brook.iceberg.partition.spec": "week",
    }
    for k, v in refused.items():
        assert validate_topic_config(k, v) is not None, k
    config = TopicConfig.from_strings({"brook.iceberg.enabled": "true"})
    assert config.brook_iceberg_enabled and config.brook_iceberg_commit_interval_ms == 60000
    assert config.brook_iceberg_partition_spec == "day" and config.iceberg_table("web.clicks") == "web_clicks"
