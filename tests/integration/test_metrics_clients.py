"""Metric values against what real clients did: records and bytes produced, bytes consumed, the lag
after a known commit.

A real broker runs in-process on a loop thread; its own hot-path hooks feed `broker.metrics`, and the
collector reads it through the server's BrokerState view, as `brook broker` does.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from brook.broker.broker import Broker
from brook.groups import GroupSettings
from brook.observability import BrokerMetrics, MetricsServer
from brook.server.listener import KafkaServer
from brook.server.state_view import BrokerState
from brook.settings.broker import BrokerSettings
from tests.integration.test_clients import create_topic
from tests.integration.test_metrics_prometheus import LoopThread
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

TOPIC = "metered"
GROUP = "metered-group"


@dataclass
class Live:
    broker: Broker
    metrics: BrokerMetrics
    bootstrap: str
    metrics_url: str
    loop: LoopThread

    def scrape(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as r:
            text = r.read().decode()
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
        }

    def value(self, name: str, **labels: str) -> float:
        return self.scrape()[(name, frozenset(labels.items()))]


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    loop = LoopThread()
    port = free_port()
    settings = BrokerSettings(
        port=port,
        data_dir=tmp_path / "data",
        groups=GroupSettings(initial_rebalance_delay_ms=0, offsets_topic_partitions=4),
    )
    broker = Broker(settings)
    server = KafkaServer(broker)
    metrics = broker.metrics  # the broker's own hooks feed it
    metrics.attach(BrokerState(broker, server))
    http = MetricsServer(metrics.registry, ready=lambda: (True, ""))

    async def start() -> None:
        await broker.start()
        await server.start()
        await http.start("127.0.0.1", 0)

    async def stop() -> None:
        await http.stop()
        await server.stop()
        await broker.stop()

    try:
        loop.run(start())
        yield Live(broker, metrics, f"127.0.0.1:{port}", f"http://127.0.0.1:{http.port}/metrics", loop)
    finally:
        loop.run(stop())
        loop.close()


def produce(bootstrap: str, partition: int, n: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "none"})
    for i in range(n):
        p.produce(TOPIC, b"x" * size, key=f"k{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def wait_for(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise TimeoutError(what)


@pytest.mark.timeout(120)
def test_metrics_match_what_real_clients_did(live: Live) -> None:
    create_topic(live.bootstrap, TOPIC, 2)
    produce(live.bootstrap, 0, 200, 100)
    produce(live.bootstrap, 1, 100, 100)

    s = live.scrape()

    def v(name: str, **labels: str) -> float:
        return s[(name, frozenset(labels.items()))]

    # Records produced: the log end offsets, the high watermark, MessagesIn.
    assert v("brook_log_end_offset", topic=TOPIC, partition="0") == 200
    assert v("brook_log_end_offset", topic=TOPIC, partition="1") == 100
    assert v("brook_high_watermark", topic=TOPIC, partition="0") == 200
    assert v("brook_log_start_offset", topic=TOPIC, partition="0") == 0
    assert v("brook_broker_messages_in_total", topic=TOPIC) == 300
    # Bytes produced: batches are stored as sent, so BytesIn is exactly what the log holds.
    stored = v("brook_log_size_bytes", topic=TOPIC, partition="0") + v(
        "brook_log_size_bytes", topic=TOPIC, partition="1"
    )
    assert stored > 300 * 100
    assert v("brook_broker_bytes_in_total", topic=TOPIC) == stored
    assert v("brook_request_total", api="Produce") >= 2
    assert v("brook_request_duration_seconds_count", api="Produce") == v("brook_request_total", api="Produce")
    assert v("brook_request_total", api="Metadata") >= 1
    # One healthy single node: it controls, leads everything it hosts, nothing under-replicated.
    assert v("brook_active_controller_count") == 1
    assert v("brook_leader_count") == v("brook_partitions") >= 2
    assert v("brook_under_replicated_partitions") == 0
    assert v("brook_offline_partitions_count") == 0

    # A known commit: 150 of partition 0's 200 records, all 100 of partition 1's.
    c = Consumer({"bootstrap.servers": live.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(TOPIC, 0, 150), TopicPartition(TOPIC, 1, 100)], asynchronous=False)
        s = live.scrape()
        assert v("brook_consumer_group_committed_offset", group=GROUP, topic=TOPIC, partition="0") == 150
        assert v("brook_consumer_group_lag", group=GROUP, topic=TOPIC, partition="0") == 50
        assert v("brook_consumer_group_lag", group=GROUP, topic=TOPIC, partition="1") == 0
        assert v("brook_open_connections") >= 1  # this consumer's connections
    finally:
        c.close()

    # More records: the lag grows at the next scrape, with no commit.
    produce(live.bootstrap, 0, 20, 100)
    assert live.value("brook_consumer_group_lag", group=GROUP, topic=TOPIC, partition="0") == 70

    # Consuming everything once sends the whole log: BytesOut equals the bytes stored.
    stored = sum(live.value("brook_log_size_bytes", topic=TOPIC, partition=p) for p in ("0", "1"))
    reader = Consumer(
        {
            "bootstrap.servers": live.bootstrap,
            "group.id": "metered-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        reader.assign([TopicPartition(TOPIC, 0, 0), TopicPartition(TOPIC, 1, 0)])
        got = 0
        deadline = time.monotonic() + 30
        while got < 320 and time.monotonic() < deadline:
            got += len([m for m in reader.consume(500, 1.0) if m.error() is None])
        assert got == 320
        wait_for(
            "BytesOut to reach the bytes stored",
            lambda: live.value("brook_broker_bytes_out_total", topic=TOPIC) >= stored,
        )
        assert live.value("brook_broker_bytes_out_total", topic=TOPIC) == stored
        assert live.value("brook_request_total", api="FetchConsumer") >= 1
    finally:
        reader.close()
    wait_for("connections to close", lambda: live.value("brook_open_connections") == 0)


@pytest.mark.timeout(120)
def test_consumer_protocol_group_metrics(live: Live) -> None:
    """A KIP-848 group (librdkafka's group.protocol=consumer): counted by protocol and state, its
    rebalances counted, and its committed offsets and lag exported as a classic group's are."""
    create_topic(live.bootstrap, TOPIC, 2)
    produce(live.bootstrap, 0, 30, 10)
    before = live.value("brook_consumer_group_rebalances_total", protocol="consumer")
    c = Consumer(
        {
            "bootstrap.servers": live.bootstrap,
            "group.id": "kip848-metered",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([TOPIC])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 30 and time.monotonic() < deadline:
            got += [m for m in c.consume(100, 0.5) if m.error() is None]
        assert len(got) == 30
        c.commit(offsets=[TopicPartition(TOPIC, 0, 20)], asynchronous=False)
        wait_for(
            "a Stable consumer-protocol group",
            lambda: (
                live.scrape().get(
                    ("brook_consumer_groups", frozenset({"protocol": "consumer", "state": "Stable"}.items()))
                )
                == 1
            ),
        )
        assert live.value("brook_consumer_group_rebalances_total", protocol="consumer") > before
        assert (
            live.value("brook_consumer_group_lag", group="kip848-metered", topic=TOPIC, partition="0") == 10
        )
    finally:
        c.close()
