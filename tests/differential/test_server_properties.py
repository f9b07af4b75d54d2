"""The same server.properties given to Apache Kafka 4.4 and to Brook (`brook broker --config`):
DescribeConfigs(BROKER) answers each property with the same value, source and synonym chain."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brook.config import BROKER_TOPIC_SYNONYMS
from brook.protocol.versions import ApiKey
from tests.support.broker import BrokerProcess
from tests.support.differential import Wire, differences
from tests.support.kafka_peer import KafkaPeer

pytestmark = pytest.mark.slow

DEFAULT = 5  # DEFAULT_CONFIG

# Set in both files (Kafka's also says what a KRaft node needs: KafkaPeer.properties).
PROPERTIES = {
    "num.partitions": "3",
    "default.replication.factor": "1",  # Kafka's default, but set: STATIC all the same
    "auto.create.topics.enable": "false",
    "log.retention.hours": "24",
    "log.retention.bytes": "1000000000",
    "log.segment.bytes": "100000000",
    # not min.insync.replicas: Kafka's storage format copies it into the metadata log as a cluster-wide
    # dynamic config (DYNAMIC_DEFAULT_BROKER_CONFIG), which Brook has no format step for
    "message.max.bytes": "2000000",
    "compression.type": "zstd",
    "offsets.retention.minutes": "60",
    "transaction.max.timeout.ms": "600000",
    "replica.lag.time.max.ms": "20000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "10",
    "max.connections": "500",
    "max.connections.per.ip": "100",
    "max.connection.creation.rate": "50",
    "quota.window.num": "5",
    "quota.window.size.seconds": "2",
    "auto.leader.rebalance.enable": "false",
    "leader.imbalance.check.interval.seconds": "120",
    "connections.max.reauth.ms": "60000",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
    "ssl.enabled.protocols": "TLSv1.3",
    "producer.id.expiration.ms": "3600000",
    "transactional.id.expiration.ms": "86400000",
}
# Kafka describes leader.imbalance.per.broker.percentage and super.users with a null value (controller
# settings in its design); Brook gives the value, so they are left out. Brook's own defaults differ for:
OWN_DEFAULTS = {
    "sasl.enabled.mechanisms": "PLAIN and SCRAM are on without a setting, Kafka's default is GSSAPI",
    "max.connections": "three quarters of the open-file limit, not Integer.MAX_VALUE",
}
# Described and compared: the ones set, their synonyms, and some left to their defaults.
KEYS = sorted(
    {
        *PROPERTIES,
        "log.retention.ms",
        "log.retention.minutes",
        "log.roll.hours",
        "log.cleanup.policy",
        "unclean.leader.election.enable",
        "ssl.client.auth",
    }
)


@pytest.fixture(scope="module")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    root: Path = tmp_path_factory.mktemp("properties")
    kafka = KafkaPeer(root / "kafka", nodes=1, heap="384m", config=PROPERTIES).start()
    config = root / "server.properties"
    config.write_text("node.id=1\n" + "".join(f"{k}={v}\n" for k, v in PROPERTIES.items()))
    brook = BrokerProcess(root / "brook" / "data", args=["--config", str(config)])
    try:
        brook.start()
        yield kafka.bootstrap, brook.bootstrap
    finally:
        brook.stop()
        kafka.stop()


def describe(wire: Wire) -> Any:
    request = {
        "resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": KEYS}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    answer = wire.send(ApiKey.DESCRIBE_CONFIGS, 4, request)
    assert isinstance(answer, dict)
    (result,) = answer["results"]
    # Kafka's docs and types are its own wording; values, sources and chains are what a client reads.
    # read_only: Brook alters the topic defaults at runtime only (Kafka also connection limits, SASL
    # mechanisms ..., which Brook applies at start-up).
    return {
        c["name"]: (
            c["value"],
            c["config_source"],
            c["read_only"] if c["name"] in BROKER_TOPIC_SYNONYMS else "start-up",
            [s for s in c["synonyms"] if not (c["name"] in OWN_DEFAULTS and s["source"] == DEFAULT)],
        )
        for c in result["configs"]
    }


def test_the_same_file_is_described_alike(peers: tuple[str, str]) -> None:
    with Wire(peers[0]) as k, Wire(peers[1]) as b:
        kafka, brook = describe(k), describe(b)
    assert set(kafka) == set(KEYS)
    diff = differences(kafka, brook)
    assert not diff, "\n".join(diff)
