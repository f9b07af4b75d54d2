"""A real Prometheus scrapes a real broker process's /metrics after real client traffic; and scrapes
Brook's collector, fed by hand with cluster states one broker cannot show, to evaluate Brook's rules.

Prometheus (Debian package `prometheus`) runs on a free loopback port with a 1 s scrape interval; the
first samples arrive ~6 s after it starts (target discovery is throttled to 5 s), so queries poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import pytest

from brook.observability import CONSUMER, BrokerMetrics, MetricsServer, assets
from brook.protocol.errors import ErrorCode
from brook.protocol.versions import ApiKey
from tests.support.prometheus import Prometheus
from tests.unit.test_observability import three_broker_leader

pytestmark = pytest.mark.slow

T = TypeVar("T")
ASSETS = Path(str(assets()))


class LoopThread:
    """An asyncio loop in a thread: the broker's loop, while the test thread plays the outside world."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="broker-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        """Run `fn` on the loop (state the collector reads is only touched there)."""
        fut: Future[T] = Future()

        def go() -> None:
            try:
                fut.set_result(fn())
            except BaseException as e:
                fut.set_exception(e)

        self.loop.call_soon_threadsafe(go)
        return fut.result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@contextlib.contextmanager
def prometheus(root: Path, targets: list[str], rule_files: list[Path]) -> Iterator[Prometheus]:
    p = Prometheus(root, rule_files)
    try:
        p.set_targets(targets)
        yield p
    finally:
        p.stop()


def scalar(results: list[dict[str, Any]]) -> float:
    assert len(results) == 1, results
    return float(results[0]["value"][1])


@pytest.mark.timeout(120)
def test_prometheus_scrapes_a_broker_after_real_client_traffic(tmp_path: Path) -> None:
    """Counters and gauges a broker process exports for what confluent-kafka did, checked exactly."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from tests.conftest import GROUP_ARGS
    from tests.integration.test_autoscaling_prometheus import metrics_port
    from tests.integration.test_clients import create_topic
    from tests.support.broker import BrokerProcess

    b = BrokerProcess(tmp_path / "data", args=GROUP_ARGS).start()
    try:
        create_topic(b.bootstrap, "orders", 1)
        producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "acks": 1})
        for i in range(20):  # one Produce request each
            producer.produce("orders", b"x" * (100 + i), key=b"k%d" % i, partition=0)
            assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g1", "enable.auto.commit": False})
        consumer.assign([TopicPartition("orders", 0, 0)])
        read = 0
        while read < 20:
            m = consumer.poll(10)
            assert m is not None and m.error() is None, m and m.error()
            read += 1
        consumer.commit(offsets=[TopicPartition("orders", 0, 15)], asynchronous=False)
        consumer.close()
        # Batches are stored as sent: what producers appended is the log's size.
        stored = sum(f.stat().st_size for f in (b.data_dir / "orders-0").glob("*.log"))
        assert stored > 20 * 100

        with prometheus(tmp_path / "prom", [f"127.0.0.1:{metrics_port(b)}"], []) as prom:
            prom.wait_until(
                "the first scrape with the group's lag",
                lambda: bool(prom.query('brook_consumer_group_lag{group="g1"}')),
                timeout=60,
            )
            assert scalar(prom.query('up{job="brook"}')) == 1
            assert scalar(prom.query('brook_broker_messages_in_total{topic="orders"}')) == 20
            assert scalar(prom.query('brook_broker_bytes_in_total{topic="orders"}')) == stored
            assert scalar(prom.query('brook_broker_bytes_out_total{topic="orders"}')) >= stored
            assert scalar(prom.query('brook_request_duration_seconds_count{api="Produce"}')) == 20
            assert scalar(prom.query('brook_log_end_offset{topic="orders", partition="0"}')) == 20
            assert scalar(prom.query('brook_high_watermark{topic="orders", partition="0"}')) == 20
            lag = 'brook_consumer_group_lag{group="g1", topic="orders", partition="0"}'
            assert scalar(prom.query(lag)) == 20 - 15
            assert scalar(prom.query("brook_under_replicated_partitions")) == 0
            assert scalar(prom.query("brook_active_controller_count")) == 1

            # More traffic shows in a later scrape.
            producer.produce("orders", b"y" * 50, partition=0)
            assert producer.flush(10) == 0
            prom.wait_until(
                "the next produce",
                lambda: scalar(prom.query('brook_broker_messages_in_total{topic="orders"}')) == 21,
            )
            assert scalar(prom.query(lag)) == 21 - 15
    finally:
        b.stop()


@pytest.mark.timeout(90)
def test_prometheus_evaluates_rules_on_hand_fed_cluster_state(tmp_path: Path) -> None:
    """Brook's collector (not a broker process) fed a three-broker state with an under-replicated
    partition and group lag: the rule file and every dashboard query work in a real Prometheus."""
    loop = LoopThread()
    view = three_broker_leader()
    metrics = BrokerMetrics(view)
    server = MetricsServer(metrics.registry)
    try:

        def events() -> None:
            metrics.on_produce("orders", 1000, 10)
            metrics.on_produce("orders", 500, 5)
            metrics.on_produce("audit", 70, 1)
            metrics.on_fetch_out("orders", 1200)
            for seconds in (0.002, 0.02, 3.0):
                metrics.on_request(ApiKey.PRODUCE, None, seconds)
            metrics.on_request(ApiKey.FETCH, CONSUMER, 0.5, ErrorCode.NOT_LEADER_OR_FOLLOWER)

        loop.call(events)
        loop.run(server.start("127.0.0.1", 0))
        with prometheus(tmp_path, [f"127.0.0.1:{server.port}"], [ASSETS / "alerts.yaml"]) as prom:
            prom.wait_until(
                "the first scrape",
                lambda: (
                    scalar(prom.query('up{job="brook"}')) == 1
                    and bool(prom.query('brook_broker_bytes_in_total{topic="orders"}'))
                ),
            )
            assert scalar(prom.query('brook_broker_bytes_in_total{topic="orders"}')) == 1500
            assert scalar(prom.query("sum(brook_broker_messages_in_total)")) == 16
            assert scalar(prom.query('brook_broker_bytes_out_total{topic="orders"}')) == 1200
            assert scalar(prom.query('brook_request_duration_seconds_count{api="Produce"}')) == 3
            assert (
                scalar(
                    prom.query(
                        'brook_request_errors_total{api="FetchConsumer", error="NOT_LEADER_OR_FOLLOWER"}'
                    )
                )
                == 1
            )
            assert scalar(prom.query("brook_under_replicated_partitions")) == 1
            assert scalar(prom.query("sum(brook_active_controller_count)")) == 1
            assert scalar(prom.query('brook_consumer_group_lag{group="g1", partition="0"}')) == 40
            assert scalar(prom.query('brook_broker_info{job="brook"}')) == 1

            # The rule file loads in a real Prometheus: the recorded cluster-wide lag, a pending alert.
            prom.wait_until(
                "the recording rules",
                lambda: (
                    bool(prom.query('brook:consumer_group_lag{group="g1", partition="0"}'))
                    and bool(prom.query('ALERTS{alertname="BrookUnderReplicatedPartitions"}'))
                ),
            )
            assert scalar(prom.query('brook:consumer_group_lag{group="g1", partition="0"}')) == 40
            assert scalar(prom.query('brook:consumer_group_lag:sum{group="g1"}')) == 40 + 0 + 5
            alert = prom.query('ALERTS{alertname="BrookUnderReplicatedPartitions"}')
            assert alert[0]["metric"]["alertstate"] == "pending"  # for: 2m
            rules = prom.get("/api/v1/rules")["data"]["groups"]
            assert all(r["health"] == "ok" for g in rules for r in g["rules"]), rules

            # A change in the broker shows in the next scrape (state is read at scrape time).
            def catch_up() -> None:
                view.parts[0].isr = [1, 2, 3]

            loop.call(catch_up)
            prom.wait_until(
                "the ISR change", lambda: scalar(prom.query("brook_under_replicated_partitions")) == 0
            )

            # Every dashboard query is valid PromQL that returns data from a live broker.
            prom.wait_until(
                "three scrapes (for rates)",
                lambda: scalar(prom.query('count_over_time(up{job="brook"}[1m])')) >= 3,
            )
            dash = json.loads((ASSETS / "grafana-dashboard.json").read_text())
            empty = []
            for p in dash["panels"]:
                for t in p.get("targets", []):
                    expr = t["expr"]
                    for var, val in (
                        ("$__rate_interval", "1m"),
                        ("$namespace", ".*"),
                        ("$job", "brook"),
                        ("$instance", ".*"),
                    ):
                        expr = expr.replace(var, val)
                    if not prom.query(expr):
                        empty.append((p["title"], expr))
            assert not empty, empty
    finally:
        loop.run(server.stop())
        loop.close()
