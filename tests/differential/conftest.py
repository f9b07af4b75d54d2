"""One Apache Kafka node and one Brook broker per test session, set up alike: ANONYMOUS clients, an
authorizer that allows what no ACL covers, groups formed at once, 10 __consumer_offsets partitions."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess
from tests.support.differential import Wire
from tests.support.kafka_peer import STANDARD_AUTHORIZER, TEST_TIMINGS, KafkaPeer

GROUP_MAX_SIZE = 3  # group.max.size: test_groups fills a classic group
KAFKA_CONFIG = {
    **TEST_TIMINGS,
    "group.max.size": str(GROUP_MAX_SIZE),
    "authorizer.class.name": STANDARD_AUTHORIZER,
    "allow.everyone.if.no.acl.found": "true",
}
BROOK_ARGS = [
    "--group-max-size",
    str(GROUP_MAX_SIZE),
    "--group-initial-rebalance-delay-ms",
    "0",
    "--offsets-topic-partitions",
    "10",
    "--authorizer-class-name",
    STANDARD_AUTHORIZER,
    "--allow-everyone-if-no-acl-found",
    "true",
]


@pytest.fixture(scope="session")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The bootstraps of (Kafka, Brook), started side by side (Kafka takes ~11 s here, Brook ~2 s).
    BROOK_DIFFERENTIAL_PEERS="kafka-host:port,brook-host:port" uses running ones instead (set up as
    below: `python -m tests.support.kafka_peer -c ...`), to iterate on a test without the start-up."""
    given = os.environ.get("BROOK_DIFFERENTIAL_PEERS")
    if given:
        k, b = given.split(",")
        yield k, b
        return
    root: Path = tmp_path_factory.mktemp("differential")
    kafka = KafkaPeer(root / "kafka", nodes=1, heap="384m", config=KAFKA_CONFIG)
    brook = BrokerProcess(root / "brook" / "data", args=BROOK_ARGS)
    failed: list[BaseException] = []

    def start_kafka() -> None:
        try:
            kafka.start()
        except BaseException as e:
            failed.append(e)

    t = threading.Thread(target=start_kafka)
    t.start()
    try:
        brook.start()
    finally:
        t.join()
    try:
        if failed:
            raise failed[0]
        yield kafka.bootstrap, brook.bootstrap
    finally:
        brook.stop()
        kafka.stop()


@pytest.fixture
def wires(peers: tuple[str, str]) -> Iterator[tuple[Wire, Wire]]:
    """Fresh connections to (Kafka, Brook)."""
    with Wire(peers[0]) as k, Wire(peers[1]) as b:
        yield k, b
