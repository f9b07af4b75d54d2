"""Brook's metrics: scrape-time state from a fake broker view, event counters, the HTTP listener."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass, field

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from brook.observability import (
    CONSUMER,
    FOLLOWER,
    REQUEST_ROLE,
    BrokerMetrics,
    GroupOffset,
    MetricsServer,
    error_name,
    request_name,
)
from brook.observability.view import SharePartitionStat, ShareRecordCounts
from brook.protocol.errors import ErrorCode
from brook.protocol.versions import ApiKey

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass
class FakePartition:
    topic: str
    index: int
    is_leader: bool = True
    replicas: list[int] = field(default_factory=lambda: [0])
    isr: list[int] = field(default_factory=lambda: [0])
    log_size_bytes: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0
    high_watermark: int = 0
    min_insync_replicas: int = 1
    open_txn_start: int | None = None  # the first offset of an open transaction, if any

    @property
    def last_stable_offset(self) -> int:
        hw = self.high_watermark
        return hw if self.open_txn_start is None else min(self.open_txn_start, hw)


@dataclass
class FakeView:
    node_id: int = 0
    controller: bool = True
    offline: int = 0
    parts: list[FakePartition] = field(default_factory=list)
    offsets: list[GroupOffset] = field(default_factory=list)
    connections: int = 0
    offline_reads: int = 0
    offline_dirs: int = 0

    def is_controller(self) -> bool:
        return self.controller

    def offline_partitions(self) -> int:
        self.offline_reads += 1
        return self.offline

    def offline_log_dirs(self) -> int:
        return self.offline_dirs

    def partitions(self) -> Iterable[FakePartition]:
        return self.parts

    def group_offsets(self) -> Iterable[tuple[str, str, int, int]]:
        return self.offsets

    def groups(self) -> Iterable[tuple[str, str, int]]:
        return [("classic", "Stable", len({o.group for o in self.offsets}))]

    def group_rebalances(self) -> Iterable[tuple[str, int]]:
        return [("classic", 1), ("consumer", 0)]

    def open_connections(self) -> int:
        return self.connections

    def share_records(self) -> ShareRecordCounts:
        return ShareRecordCounts(0, 0, 0, 0, 0)

    def share_partitions(self) -> Iterable[SharePartitionStat]:
        return []


def three_broker_leader() -> FakeView:
    """Broker 1 of a 3-broker cluster: leads orders-0 (ISR short by one) and orders-1 (full), follows
    orders-2, coordinates group g1."""
    return FakeView(
        node_id=1,
        parts=[
            FakePartition("orders", 0, True, [1, 2, 3], [1, 2], 4096, 10, 110, 100, 2),
            FakePartition("orders", 1, True, [1, 2, 3], [1, 2, 3], 2048, 0, 50, 50, 2),
            FakePartition("orders", 2, False, [2, 3, 1], [2, 3, 1], 1024, 0, 30, 25, 2),
        ],
        offsets=[
            GroupOffset("g1", "orders", 0, 60),  # lag 100 - 60 = 40
            GroupOffset("g1", "orders", 1, 50),  # caught up
            GroupOffset("g1", "orders", 2, 20),  # follower replica here: its high watermark, 25 - 20
            GroupOffset("g1", "orders", 3, 7),  # not hosted here: committed offset only
            GroupOffset("g1", "payments", 0, -1),  # no offset
        ],
        connections=7,
    )


def scrape(registry: CollectorRegistry) -> Samples:
    out: Samples = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def series(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


# -- scrape-time state -------------------------------------------------------------------------------
def test_replication_health_counts_partitions_led_here() -> None:
    s = scrape(BrokerMetrics(three_broker_leader()).registry)
    assert value(s, "brook_partitions") == 3
    assert value(s, "brook_leader_count") == 2
    # orders-0 has 2 of 3 in sync; the followed orders-2 does not count (Kafka: leaders report URP).
    assert value(s, "brook_under_replicated_partitions") == 1
    assert value(s, "brook_under_min_isr_partitions") == 0
    assert value(s, "brook_at_min_isr_partitions") == 1  # orders-0: ISR 2 == min.insync.replicas 2
    assert value(s, "brook_partition_in_sync_replicas", topic="orders", partition="0") == 2
    assert value(s, "brook_partition_replicas", topic="orders", partition="0") == 3
    assert ("brook_partition_replicas", frozenset({("topic", "orders"), ("partition", "2")})) not in s
    assert value(s, "brook_broker_info", broker="1") == 1
    assert value(s, "brook_open_connections") == 7


def test_under_min_isr() -> None:
    view = FakeView(parts=[FakePartition("t", 0, True, [0, 1, 2], [0], min_insync_replicas=2)])
    s = scrape(BrokerMetrics(view).registry)
    assert value(s, "brook_under_min_isr_partitions") == 1
    assert value(s, "brook_at_min_isr_partitions") == 0
    assert value(s, "brook_under_replicated_partitions") == 1


def test_log_gauges_for_every_hosted_replica() -> None:
    s = scrape(BrokerMetrics(three_broker_leader()).registry)
    for name, expected in (
        ("brook_log_size_bytes", {"0": 4096, "1": 2048, "2": 1024}),
        ("brook_log_start_offset", {"0": 10, "1": 0, "2": 0}),
        ("brook_log_end_offset", {"0": 110, "1": 50, "2": 30}),
        ("brook_high_watermark", {"0": 100, "1": 50, "2": 25}),
    ):
        got = {dict(labels)["partition"]: v for labels, v in series(s, name).items()}
        assert got == expected, name


def test_consumer_lag_is_high_watermark_minus_committed() -> None:
    s = scrape(BrokerMetrics(three_broker_leader()).registry)
    lag = {dict(k)["partition"]: v for k, v in series(s, "brook_consumer_group_lag").items()}
    committed = {
        dict(k)["partition"]: v for k, v in series(s, "brook_consumer_group_committed_offset").items()
    }
    assert lag == {"0": 40, "1": 0, "2": 5}
    assert committed == {"0": 60, "1": 50, "2": 20, "3": 7}  # no -1, lag only where hosted
    assert value(s, "brook_consumer_group_lag", group="g1", topic="orders", partition="0") == 40


def test_lag_is_never_negative() -> None:
    view = FakeView(
        parts=[FakePartition("t", 0, high_watermark=10, log_end_offset=10)],
        offsets=[GroupOffset("g", "t", 0, 15)],
    )
    s = scrape(BrokerMetrics(view).registry)
    assert value(s, "brook_consumer_group_lag", group="g", topic="t", partition="0") == 0


def test_lag_is_measured_to_the_last_stable_offset() -> None:
    """An open transaction holds read_committed consumers back: lag counts only what they can read."""
    view = FakeView(
        parts=[FakePartition("t", 0, high_watermark=100, log_end_offset=100, open_txn_start=70)],
        offsets=[GroupOffset("g", "t", 0, 60)],
    )
    s = scrape(BrokerMetrics(view).registry)
    assert value(s, "brook_consumer_group_lag", group="g", topic="t", partition="0") == 10


def test_controller_metrics() -> None:
    view = FakeView(controller=True, offline=3)
    registry = BrokerMetrics(view).registry
    s = scrape(registry)
    assert value(s, "brook_active_controller_count") == 1
    assert value(s, "brook_offline_partitions_count") == 3
    view.controller = False
    reads = view.offline_reads
    s = scrape(registry)
    assert value(s, "brook_active_controller_count") == 0
    assert value(s, "brook_offline_partitions_count") == 0  # only the controller knows; not asked
    assert view.offline_reads == reads


def test_offline_log_directory_count() -> None:
    view = FakeView()
    registry = BrokerMetrics(view).registry
    assert value(scrape(registry), "brook_offline_log_directory_count") == 0
    view.offline_dirs = 1
    assert value(scrape(registry), "brook_offline_log_directory_count") == 1


def test_state_is_read_at_scrape_time() -> None:
    view = FakeView(parts=[FakePartition("t", 0, log_end_offset=5, high_watermark=5)])
    metrics = BrokerMetrics(view)
    assert value(scrape(metrics.registry), "brook_log_end_offset", topic="t", partition="0") == 5
    view.parts[0].log_end_offset = 9
    view.parts.append(FakePartition("t", 1))
    view.connections = 2
    s = scrape(metrics.registry)
    assert value(s, "brook_log_end_offset", topic="t", partition="0") == 9
    assert value(s, "brook_partitions") == 2
    assert value(s, "brook_open_connections") == 2
    view.parts.clear()  # a deleted topic's gauges disappear
    assert series(scrape(metrics.registry), "brook_log_end_offset") == {}


def test_a_failing_view_section_leaves_the_rest_of_the_scrape() -> None:
    class Broken(FakeView):
        def group_offsets(self) -> Iterable[tuple[str, str, int, int]]:
            raise RuntimeError("coordinator is loading")

    view = Broken(parts=[FakePartition("t", 0, log_end_offset=3)], connections=1)
    registry = BrokerMetrics(view).registry
    s = scrape(registry)
    assert value(s, "brook_log_end_offset", topic="t", partition="0") == 3
    assert value(s, "brook_open_connections") == 1
    assert series(s, "brook_consumer_group_lag") == {}
    assert value(s, "brook_metrics_collect_errors_total") == 1
    assert value(scrape(registry), "brook_metrics_collect_errors_total") == 2


def test_registering_does_not_read_the_view() -> None:
    class Unready(FakeView):
        def partitions(self) -> Iterable[FakePartition]:
            raise AssertionError("read at registration")

    BrokerMetrics(Unready())  # describe() gives names only


def test_view_can_be_attached_later_once() -> None:
    metrics = BrokerMetrics()
    assert "brook_partitions" not in {n for n, _ in scrape(metrics.registry)}
    metrics.attach(FakeView(parts=[FakePartition("t", 0)]))
    assert value(scrape(metrics.registry), "brook_partitions") == 1
    with pytest.raises(RuntimeError):
        metrics.attach(FakeView())


def test_brokers_in_one_process_have_their_own_registries() -> None:
    a, b = BrokerMetrics(FakeView(node_id=1)), BrokerMetrics(FakeView(node_id=2))
    a.on_produce("t", 100, 2)
    sa, sb = scrape(a.registry), scrape(b.registry)
    assert value(sa, "brook_broker_info", broker="1") == 1
    assert value(sb, "brook_broker_info", broker="2") == 1
    assert value(sa, "brook_broker_bytes_in_total", topic="t") == 100
    assert series(sb, "brook_broker_bytes_in_total") == {}


# -- events ------------------------------------------------------------------------------------------
def test_bytes_and_messages_in_and_out() -> None:
    m = BrokerMetrics()
    m.on_produce("orders", 1000, 10)
    m.on_produce("orders", 500, 5)
    m.on_produce("audit", 70, 1)
    m.on_fetch_out("orders", 1200)
    m.on_fetch_out("orders", 300, follower=True)
    m.on_replication_in(250)
    s = scrape(m.registry)
    assert value(s, "brook_broker_bytes_in_total", topic="orders") == 1500
    assert value(s, "brook_broker_messages_in_total", topic="orders") == 15
    assert value(s, "brook_broker_bytes_in_total", topic="audit") == 70
    # Kafka: follower fetches are replication bytes, not BytesOut.
    assert value(s, "brook_broker_bytes_out_total", topic="orders") == 1200
    assert value(s, "brook_broker_replication_bytes_out_total") == 300
    assert value(s, "brook_broker_replication_bytes_in_total") == 250
    assert not any(n.endswith("_created") for n, _ in s)


def test_requests_latency_histogram_and_fetch_roles() -> None:
    m = BrokerMetrics()
    m.on_request(ApiKey.PRODUCE, None, 0.002)
    m.on_request(ApiKey.PRODUCE, None, 0.02)
    m.on_request(ApiKey.PRODUCE, None, 3.0, ErrorCode.REQUEST_TIMED_OUT)
    m.on_request(ApiKey.FETCH, CONSUMER, 0.5)
    m.on_request(ApiKey.FETCH, FOLLOWER, 0.001)
    m.on_request("METADATA", None, 0.0001)
    s = scrape(m.registry)
    assert value(s, "brook_request_total", api="Produce") == 3
    assert value(s, "brook_request_total", api="FetchConsumer") == 1
    assert value(s, "brook_request_total", api="FetchFollower") == 1
    assert value(s, "brook_request_total", api="Metadata") == 1
    h = "brook_request_duration_seconds"
    assert value(s, f"{h}_count", api="Produce") == 3
    assert value(s, f"{h}_sum", api="Produce") == pytest.approx(3.022)
    assert value(s, f"{h}_bucket", api="Produce", le="0.0025") == 1
    assert value(s, f"{h}_bucket", api="Produce", le="0.025") == 2
    assert value(s, f"{h}_bucket", api="Produce", le="2.5") == 2
    assert value(s, f"{h}_bucket", api="Produce", le="5.0") == 3
    assert value(s, f"{h}_bucket", api="Produce", le="+Inf") == 3
    assert value(s, "brook_request_errors_total", api="Produce", error="REQUEST_TIMED_OUT") == 1
    assert len(series(s, "brook_request_errors_total")) == 1


def test_the_fetch_handler_tells_the_dispatcher_its_role() -> None:
    """The hook pattern: dispatch resets REQUEST_ROLE, the handler sets it, dispatch reads it back."""
    m = BrokerMetrics()

    async def fetch_handler(replica_id: int) -> None:
        REQUEST_ROLE.set(FOLLOWER if replica_id >= 0 else CONSUMER)
        await asyncio.sleep(0)

    async def metadata_handler(replica_id: int) -> None:
        await asyncio.sleep(0)

    async def dispatch(api: ApiKey, replica_id: int) -> None:
        token = REQUEST_ROLE.set(None)
        try:
            await (fetch_handler if api == ApiKey.FETCH else metadata_handler)(replica_id)
        finally:
            m.on_request(api, REQUEST_ROLE.get(), 0.001)
            REQUEST_ROLE.reset(token)

    async def connection() -> None:  # one connection's requests, in order
        await dispatch(ApiKey.FETCH, 2)
        await dispatch(ApiKey.METADATA, -1)
        await dispatch(ApiKey.FETCH, -1)

    async def main() -> None:
        await asyncio.gather(connection(), connection())

    asyncio.run(main())
    s = scrape(m.registry)
    assert value(s, "brook_request_total", api="FetchFollower") == 2
    assert value(s, "brook_request_total", api="FetchConsumer") == 2
    assert value(s, "brook_request_total", api="Metadata") == 2


def test_partition_errors_are_counted_per_partition() -> None:
    m = BrokerMetrics()
    m.on_error(ApiKey.PRODUCE, None, ErrorCode.NOT_LEADER_OR_FOLLOWER, 3)
    m.on_error(ApiKey.PRODUCE, None, ErrorCode.NONE, 5)  # not an error
    m.on_error(ApiKey.FETCH, FOLLOWER, 9999)  # a code Brook does not name
    s = scrape(m.registry)
    assert value(s, "brook_request_errors_total", api="Produce", error="NOT_LEADER_OR_FOLLOWER") == 3
    assert value(s, "brook_request_errors_total", api="FetchFollower", error="9999") == 1
    assert len(series(s, "brook_request_errors_total")) == 2


def test_isr_changes() -> None:
    m = BrokerMetrics()
    m.on_isr_shrink()
    m.on_isr_shrink()
    m.on_isr_expand()
    s = scrape(m.registry)
    assert value(s, "brook_isr_shrinks_total") == 2
    assert value(s, "brook_isr_expands_total") == 1


def test_kafka_request_names() -> None:
    assert request_name(ApiKey.LIST_OFFSETS) == "ListOffsets"
    assert request_name(int(ApiKey.OFFSET_FOR_LEADER_EPOCH)) == "OffsetForLeaderEpoch"
    assert request_name("API_VERSIONS") == "ApiVersions"
    assert request_name("InitProducerId") == "InitProducerId"
    assert request_name(ApiKey.FETCH) == "FetchConsumer"
    assert request_name(ApiKey.FETCH, FOLLOWER) == "FetchFollower"
    assert request_name("Fetch", CONSUMER) == "FetchConsumer"
    assert request_name(4242) == "Api4242"
    assert error_name(ErrorCode.UNKNOWN_SERVER_ERROR) == "UNKNOWN_SERVER_ERROR"


# -- cardinality -------------------------------------------------------------------------------------
def test_label_cardinality_is_bounded_by_topics_apis_and_partitions() -> None:
    view = FakeView(
        parts=[FakePartition(f"t{t}", p) for t in range(3) for p in range(4)],
        offsets=[GroupOffset(f"g{g}", "t0", p, 0) for g in range(2) for p in range(4)],
    )
    m = BrokerMetrics(view)
    for i in range(2000):
        m.on_produce(f"t{i % 3}", 10, 1)
        m.on_fetch_out(f"t{i % 3}", 10)
        m.on_request((ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA)[i % 3], CONSUMER, 0.001)
    s = scrape(m.registry)
    assert len(series(s, "brook_broker_bytes_in_total")) == 3
    assert len(series(s, "brook_broker_bytes_out_total")) == 3
    assert len(series(s, "brook_request_total")) == 3
    assert len(series(s, "brook_request_duration_seconds_bucket")) == 3 * 16  # 15 buckets + +Inf
    assert len(series(s, "brook_log_end_offset")) == 12
    assert len(series(s, "brook_consumer_group_lag")) == 8
    # Only these label names exist: no broker label, no per-record or per-client labels.
    # (protocol and state: a group's, two protocols with at most five states each)
    allowed = {"topic", "partition", "group", "api", "error", "le", "broker", "protocol", "state"}
    assert {name for _, labels in s for name, _ in labels} <= allowed
    assert {n for (n, labels) in s if "broker" in dict(labels)} == {"brook_broker_info"}


def test_forget_topic_drops_its_counters() -> None:
    m = BrokerMetrics()
    m.on_produce("gone", 10, 1)
    m.on_fetch_out("gone", 10)
    m.on_produce("kept", 10, 1)
    m.forget_topic("gone")
    m.forget_topic("never-seen")
    s = scrape(m.registry)
    assert {dict(k)["topic"] for k in series(s, "brook_broker_bytes_in_total")} == {"kept"}
    assert series(s, "brook_broker_bytes_out_total") == {}
    m.on_produce("gone", 5, 1)  # re-created: counts from zero
    assert value(scrape(m.registry), "brook_broker_bytes_in_total", topic="gone") == 5


# -- HTTP --------------------------------------------------------------------------------------------
async def _get(session: aiohttp.ClientSession, url: str, **headers: str) -> tuple[int, str, str]:
    async with session.get(url, headers=headers) as r:
        return r.status, r.headers.get("Content-Type", ""), await r.text()


def test_http_metrics_health_and_readiness() -> None:
    state: dict[str, bool | tuple[bool, str]] = {"ready": (False, "catching up on __consumer_offsets")}

    def ready() -> bool | tuple[bool, str]:
        return state["ready"]

    async def main() -> None:
        metrics = BrokerMetrics(FakeView(parts=[FakePartition("t", 0, log_end_offset=42)]))
        metrics.on_produce("t", 123, 4)
        server = MetricsServer(metrics.registry, ready)
        await server.start("127.0.0.1", 0)
        assert server.port > 0
        base = f"http://127.0.0.1:{server.port}"
        try:
            async with aiohttp.ClientSession() as session:
                status, ctype, text = await _get(session, f"{base}/metrics")
                assert status == 200 and ctype.startswith("text/plain")
                assert 'brook_broker_bytes_in_total{topic="t"} 123.0' in text
                assert 'brook_log_end_offset{partition="0",topic="t"} 42.0' in text
                status, ctype, text = await _get(
                    session, f"{base}/metrics", Accept="application/openmetrics-text; version=1.0.0"
                )
                assert status == 200 and ctype.startswith("application/openmetrics-text")
                assert text.endswith("# EOF\n")
                prometheus_accept = (
                    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
                    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
                )
                status, ctype, _ = await _get(session, f"{base}/metrics", Accept=prometheus_accept)
                assert status == 200 and ctype.startswith("text/plain; version=0.0.4")

                status, _, text = await _get(session, f"{base}/healthz")
                assert status == 200 and json.loads(text) == {"status": "ok"}

                status, ctype, text = await _get(session, f"{base}/readyz")
                assert status == 503 and ctype.startswith("application/json")
                assert json.loads(text) == {
                    "status": "not ready",
                    "reason": "catching up on __consumer_offsets",
                }
                state["ready"] = False
                status, _, text = await _get(session, f"{base}/readyz")
                assert status == 503 and json.loads(text)["reason"] == "not ready"
                state["ready"] = True
                status, _, text = await _get(session, f"{base}/readyz")
                assert status == 200 and json.loads(text) == {"status": "ready"}
        finally:
            await server.stop()
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientConnectionError):
                await _get(session, f"{base}/healthz")

    asyncio.run(asyncio.wait_for(main(), 20))


def test_readyz_when_the_check_raises_and_without_a_check() -> None:
    def broken() -> bool:
        raise RuntimeError("no metadata yet")

    async def main() -> None:
        servers = [MetricsServer(CollectorRegistry(), broken), MetricsServer(CollectorRegistry())]
        for s in servers:
            await s.start("127.0.0.1", 0)
        try:
            async with aiohttp.ClientSession() as session:
                status, _, text = await _get(session, f"http://127.0.0.1:{servers[0].port}/readyz")
                assert status == 503 and "no metadata yet" in json.loads(text)["reason"]
                status, _, _ = await _get(session, f"http://127.0.0.1:{servers[1].port}/readyz")
                assert status == 200
        finally:
            for s in servers:
                await s.stop()

    asyncio.run(asyncio.wait_for(main(), 20))
