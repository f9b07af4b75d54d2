from __future__ import annotations

import javaproperties

from brook_operator import brokerconfig
from brook_operator.brokerconfig import min_insync_replicas, server_properties, topic_defaults


def test_split_into_topic_defaults_and_server_properties() -> None:
    cfg = {
        "retention.ms": "1000",
        "num.partitions": "6",
        "auto.create.topics.enable": "false",
        "cleanup.policy": "compact",
        "log.retention.hours": "24",
        "max.connections": "1000",
    }
    assert topic_defaults(cfg) == {"cleanup.policy": "compact", "retention.ms": "1000"}
    text = server_properties(cfg)
    assert text.startswith("#Rendered by the Brook operator")
    assert javaproperties.loads(text) == {
        "auto.create.topics.enable": "false",
        "log.retention.hours": "24",
        "max.connections": "1000",
        "num.partitions": "6",
    }


def test_validation() -> None:
    assert brokerconfig.validate_broker_config({"num.partitions": "3", "retention.ms": "-1"}) == []
    errs = brokerconfig.validate_broker_config(
        {
            "listeners": "PLAINTEXT://:9092",
            "node.id": "1",
            "ssl.client.auth": "required",
            "num.partitions": "x",
            "nope": "1",
            "retention.ms": "-5",
            "process.roles": "broker",
            "log.segment.bytes": "1",
        }
    )
    assert errs == [
        "listeners is set by the operator and cannot be configured",
        "log.segment.bytes=1: log.segment.bytes must be an integer from 14 to 2147483647, got 1",
        "node.id is set by the operator and cannot be configured",
        "unknown broker config 'nope'",
        "num.partitions=x: must be an integer from 1 to 2147483647",
        "process.roles means nothing to Brook: Brook has no KRaft quorum: its brokers elect a controller "
        "through etcd",
        "retention.ms must be an integer from -1 to 9223372036854775807, got -5",
        "ssl.client.auth is set by the operator and cannot be configured",
    ]


def test_min_insync_default() -> None:
    assert min_insync_replicas({}) == 1
    assert min_insync_replicas({"min.insync.replicas": "2"}) == 2


def test_normalize_value() -> None:
    assert brokerconfig.normalize_value(True) == "true"
    assert brokerconfig.normalize_value(5) == "5"
    assert brokerconfig.normalize_value("x") == "x"
    assert brokerconfig.normalize_value([1]) is None
