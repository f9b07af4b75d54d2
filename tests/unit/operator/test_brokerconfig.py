from __future__ import annotations

from brook_operator import brokerconfig
from brook_operator.brokerconfig import BROKER_SETTINGS, broker_env, min_insync_replicas, topic_defaults


def test_split_into_topic_defaults_and_broker_env() -> None:
    cfg = {
        "retention.ms": "1000",
        "num.partitions": "6",
        "auto.create.topics.enable": "FALSE",
        "cleanup.policy": "compact",
        "socket.request.max.bytes": "1048576",
    }
    assert topic_defaults(cfg) == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert broker_env(cfg) == {
        "BROOK_AUTO_CREATE_TOPICS": "false",
        "BROOK_MAX_REQUEST_BYTES": "1048576",
        "BROOK_NUM_PARTITIONS": "6",
    }


def test_every_broker_setting_has_a_brook_env_var() -> None:
    assert all(s.env.startswith("BROOK_") for s in BROKER_SETTINGS.values())
    assert len({s.env for s in BROKER_SETTINGS.values()}) == len(BROKER_SETTINGS)


def test_validation() -> None:
    assert brokerconfig.validate_broker_config({"num.partitions": "3", "retention.ms": "-1"}) == []
    errs = brokerconfig.validate_broker_config(
        {"listeners": "PLAINTEXT://:9092", "num.partitions": "x", "nope": "1", "retention.ms": "-5"}
    )
    assert errs == [
        "listeners is set by the operator and cannot be configured",
        "unknown broker config 'nope'",
        "num.partitions must be an integer, got 'x'",
        "retention.ms must be an integer from -1 to 9223372036854775807, got -5",
    ]


def test_min_insync_default() -> None:
    assert min_insync_replicas({}) == 1
    assert min_insync_replicas({"min.insync.replicas": "2"}) == 2


def test_normalize_value() -> None:
    assert brokerconfig.normalize_value(True) == "true"
    assert brokerconfig.normalize_value(5) == "5"
    assert brokerconfig.normalize_value("x") == "x"
    assert brokerconfig.normalize_value([1]) is None
