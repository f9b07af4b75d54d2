"""Racks over the wire: DescribeConfigs(BROKER) reports broker.rack, and a consumer with client.rack
reads from the in-sync follower of its rack (KIP-392, RackAwareReplicaSelector)."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka.protocol.admin import DescribeConfigsRequest

from brook.protocol.errors import ErrorCode
from tests.support.cluster import Cluster
from tests.support.ports import free_port
from tests.support.raw import RawClient, fetch_request

pytestmark = pytest.mark.slow

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture(scope="module")
def racked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, dict[int, int]]]:
    metrics = {n: free_port() for n in range(3)}
    c = Cluster(
        tmp_path_factory.mktemp("racked"),
        extra_args=["--replica-selector-class", SELECTOR],
        node_args=lambda n: ["--rack", f"rack-{n}", "--metrics-port", str(metrics[n])],
    ).start()
    try:
        yield c, metrics
    finally:
        c.stop()


def bytes_out(metrics_port: int, topic: str) -> float:
    """Record bytes this broker sent to consumers for `topic` (brook_broker_bytes_out)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(rf'^brook_broker_bytes_out_total{{topic="{re.escape(topic)}"}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def test_broker_configs_report_each_rack(racked: tuple[Cluster, dict[int, int]]) -> None:
    c, _ = racked
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    for n in range(3):  # each BROKER resource is answered by that broker
        res = ConfigResource(ConfigResource.Type.BROKER, str(n))
        configs = admin.describe_configs([res])[res].result(10)
        assert configs["broker.rack"].value == f"rack-{n}"
        assert configs["broker.id"].value == configs["node.id"].value == str(n)
        assert configs["replica.selector.class"].value == SELECTOR
        assert configs["num.partitions"].is_default and not configs["broker.rack"].is_default

    D = DescribeConfigsRequest
    with RawClient(c.broker(0).bootstrap) as raw:
        for name, code in [("0", 0), ("1", ErrorCode.INVALID_REQUEST), ("x", ErrorCode.INVALID_REQUEST)]:
            res = D.DescribeConfigsResource(resource_type=4, resource_name=name, configuration_keys=None)
            req = D(resources=[res])
            (r,) = raw.request(req, 1).results
            assert r.error_code == code, name


def test_a_consumer_reads_from_the_follower_in_its_rack(racked: tuple[Cluster, dict[int, int]]) -> None:
    c, metrics = racked
    topic = "fff"
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(20)
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(300):
        p.produce(topic, b"m%04d" % i + b"." * 100)
    assert p.flush(20) == 0
    md = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
    leader = md.leader
    follower = next(r for r in md.replicas if r != leader)

    cons = Consumer(
        {
            "bootstrap.servers": c.bootstrap,
            "group.id": "fff",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "client.rack": f"rack-{follower}",
        }
    )
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        cons.subscribe([topic])
        while len(got) < 300 and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value()[:5])
    finally:
        cons.close()
    assert got == [b"m%04d" % i for i in range(300)]
    assert bytes_out(metrics[follower], topic) > 300 * 100  # the follower served the records
    assert bytes_out(metrics[leader], topic) == 0  # the leader only named the follower

    # A consumer's Fetch below v11 carries no rack and must go to the leader; from v11 any replica
    # serves it, up to its high watermark.
    for version, code in [(10, ErrorCode.NOT_LEADER_OR_FOLLOWER), (11, 0)]:
        req = fetch_request(topic)
        with RawClient(c.broker(follower).bootstrap) as raw:
            part = raw.request(req, version).responses[0].partitions[0]
        assert part.error_code == code, version
        if code == 0:
            assert part.high_watermark == 300 and part.records
