"""DescribeConfigs for the broker's own configs (BROKER) and loggers (BROKER_LOGGER), per version,
over a raw socket (kafka-python's encoder and decoder, not Brook's)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import DescribeConfigsRequest

from brook.config import BROKER_TOPIC_SYNONYMS
from brook.protocol.errors import ErrorCode
from tests.support.broker import BrokerProcess
from tests.support.raw import RawClient

pytestmark = pytest.mark.slow

BROKER, BROKER_LOGGER = 4, 8
STATIC, DEFAULT, LOGGER = 4, 5, 6


def describe(
    c: RawClient,
    version: int,
    resource_type: int,
    name: str,
    keys: list[str] | None = None,
    synonyms: bool = False,
    documentation: bool = False,
) -> Any:
    D = DescribeConfigsRequest
    res = D.DescribeConfigsResource(resource_type=resource_type, resource_name=name, configuration_keys=keys)
    req = D(resources=[res], include_synonyms=synonyms, include_documentation=documentation)
    (result,) = c.request(req, version).results
    return result


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_broker_resource_per_version(broker: BrokerProcess, version: int) -> None:
    with RawClient(broker.bootstrap) as c:
        r = describe(c, version, BROKER, "0")
        assert r.error_code == 0
        configs = {e.name: e for e in r.configs}
        for name in ("broker.rack", "broker.id", "node.id", "log.dirs", "listeners", "message.max.bytes"):
            assert name in configs, name
        assert configs["broker.rack"].value is None and configs["broker.rack"].config_source == DEFAULT
        assert (configs["num.partitions"].value, configs["num.partitions"].config_source) == ("3", STATIC)
        assert not any(e.synonyms for e in r.configs)
        assert all(e.read_only == (e.name not in BROKER_TOPIC_SYNONYMS) for e in r.configs)
        if version >= 3:
            assert configs["num.partitions"].config_type == 3  # INT
            assert all(e.documentation is None for e in r.configs)

        r = describe(c, version, BROKER, "0", ["num.partitions"], synonyms=True, documentation=True)
        (e,) = r.configs
        assert [(s.name, s.value, s.source) for s in e.synonyms] == [
            ("num.partitions", "3", STATIC),
            ("num.partitions", "1", DEFAULT),
        ]
        if version >= 3:
            assert e.documentation

        assert len(describe(c, version, BROKER, "0", []).configs) == len(configs)  # empty: all
        r = describe(c, version, BROKER, "")  # the cluster's dynamic defaults: none
        assert (r.error_code, list(r.configs)) == (0, [])
        for other in ("1", "zero"):
            r = describe(c, version, BROKER, other)
            assert (r.error_code, list(r.configs)) == (ErrorCode.INVALID_REQUEST, []), other
            assert r.error_message


def test_broker_logger_resource(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        r = describe(c, 4, BROKER_LOGGER, "0")
        assert r.error_code == 0
        levels = {e.name: (e.value, e.config_source) for e in r.configs}
        assert levels["root"] == ("INFO", LOGGER)  # the broker runs with --log-level INFO
        assert [e.name for e in describe(c, 4, BROKER_LOGGER, "0", ["root"]).configs] == ["root"]
        for bad in ("", "7"):
            assert describe(c, 4, BROKER_LOGGER, bad).error_code == ErrorCode.INVALID_REQUEST, bad
