"""Client quotas with real clients: AlterClientQuotas/DescribeClientQuotas on the wire (as the operator
and Kafka's kafka-configs.sh send them), and confluent-kafka producers of which one is held to its
producer_byte_rate (throttle_time_ms reported, the connection muted) while the other is not.

The broker runs with short quota windows (3 x 1 s) so a rate settles within seconds."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

from tests.support.broker import BrokerProcess
from tests.support.raw import RawClient

QUOTA = 256 * 1024  # bytes per second
Entity = list[tuple[str, str | None]]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("quotas")
    b = BrokerProcess(tmp / "data", args=["--quota-window-num", "3", "--quota-window-size-seconds", "1"])
    b.start()
    try:
        yield b
    finally:
        b.stop()


def alter(b: BrokerProcess, entity: Entity, ops: dict[str, float | None]) -> tuple[int, str | None]:
    Req = AlterClientQuotasRequest
    entry = Req.EntryData(
        entity=[Req.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[Req.EntryData.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()],
    )
    with RawClient(b.bootstrap) as c:
        r = c.request(Req(entries=[entry], validate_only=False), 1)
    return r.entries[0].error_code, r.entries[0].error_message


def describe(b: BrokerProcess, components: list[tuple[str, int, str | None]], strict: bool = False) -> Any:
    Req = DescribeClientQuotasRequest
    comps = [Req.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components]
    with RawClient(b.bootstrap) as c:
        return c.request(Req(components=comps, strict=strict), 1)


def entries(resp: Any) -> dict[str, dict[str, float]]:
    return {
        ",".join(f"{e.entity_type}={e.entity_name}" for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in resp.entries
    }


def test_quotas_are_altered_described_and_kept(broker: BrokerProcess) -> None:
    assert (
        alter(broker, [("user", "alice")], {"producer_byte_rate": 1024, "consumer_byte_rate": 2048})[0] == 0
    )
    assert alter(broker, [("user", None), ("client-id", "app")], {"request_percentage": 50.0})[0] == 0
    assert alter(broker, [("client-id", None)], {"consumer_byte_rate": 4096})[0] == 0
    every = entries(describe(broker, []))
    assert every["user=alice"] == {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    assert every["user=None,client-id=app"] == {"request_percentage": 50.0}
    # Match types: 0 exact, 1 the default entity, 2 any named one; strict: only those entity types.
    assert set(entries(describe(broker, [("user", 0, "alice")]))) == {"user=alice"}
    assert set(entries(describe(broker, [("user", 1, None)]))) == {"user=None,client-id=app"}
    assert set(entries(describe(broker, [("client-id", 2, None)]))) == {"user=None,client-id=app"}
    assert set(entries(describe(broker, [("client-id", 1, None)], strict=True))) == {"client-id=None"}
    # Removing a key keeps the others; refusals as Kafka's (INVALID_REQUEST = 42).
    assert alter(broker, [("user", "alice")], {"consumer_byte_rate": None})[0] == 0
    assert entries(describe(broker, [("user", 0, "alice")]))["user=alice"] == {"producer_byte_rate": 1024.0}
    assert alter(broker, [("user", "alice")], {"bogus_rate": 1})[0] == 42
    assert alter(broker, [("ip", "10.0.0.1")], {"producer_byte_rate": 1})[0] == 42
    assert alter(broker, [("user", "alice")], {"producer_byte_rate": -5})[0] == 42
    assert alter(broker, [("user", "alice"), ("ip", "1.2.3.4")], {"producer_byte_rate": 1})[0] == 42
    assert describe(broker, [("user", 0, "a"), ("user", 0, "b")]).error_code == 42
    broker.restart()
    assert entries(describe(broker, [("user", 0, "alice")]))["user=alice"] == {"producer_byte_rate": 1024.0}
    for entity in (
        [("user", "alice")],
        [("user", None), ("client-id", "app")],
        [("client-id", None)],
    ):
        keys = ("producer_byte_rate", "request_percentage", "consumer_byte_rate")
        assert alter(broker, entity, dict.fromkeys(keys))[0] == 0
    assert describe(broker, []).entries == []


def _flood(
    b: BrokerProcess, client_id: str, topic: str, seconds: float, limit: int, out: dict[str, Any]
) -> None:
    """Produce 1 KiB records as fast as the broker lets this client for `seconds` (at most `limit` bytes);
    count acknowledged bytes and the largest throttle time the client's statistics report."""
    acked = [0]
    throttle = [0]

    def stats(raw: str) -> None:
        for broker_stats in json.loads(raw).get("brokers", {}).values():
            throttle[0] = max(throttle[0], int(broker_stats.get("throttle", {}).get("max", 0)))

    p = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            # Requests small next to the quota: a single 1 MB batch would be 4 s of it at once.
            "batch.size": 32 * 1024,
            "statistics.interval.ms": 500,
            "stats_cb": stats,
            "queue.buffering.max.kbytes": 2048,
        }
    )
    value = b"x" * 1024

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += len(msg.value())

    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end and sent < limit:
        try:
            p.produce(topic, value, on_delivery=delivered)
            sent += len(value)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    while acked[0] < sent and time.monotonic() < end:
        p.poll(0.05)
    elapsed = seconds if sent < limit else time.monotonic() - (end - seconds)
    out[client_id] = {"rate": acked[0] / elapsed, "throttle": throttle[0]}  # acknowledged in the period
    p.flush(60)


def test_a_producer_quota_holds_its_rate_while_another_client_is_unaffected(broker: BrokerProcess) -> None:
    assert alter(broker, [("client-id", "throttled")], {"producer_byte_rate": QUOTA})[0] == 0
    out: dict[str, Any] = {}
    threads = [
        threading.Thread(target=_flood, args=(broker, cid, f"quota-{cid}", 10.0, limit, out))
        for cid, limit in (("throttled", 1 << 30), ("free", 32 * QUOTA))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    throttled, free = out["throttled"], out["free"]
    # The window lets num-1 windows' worth through before the first throttle: at most 2 s of quota
    # on top of 10 s of it, with room for a loaded machine's timing.
    assert throttled["rate"] <= QUOTA * 1.5, out
    assert throttled["rate"] >= QUOTA * 0.5, out
    assert throttled["throttle"] > 0, out
    assert free["rate"] >= QUOTA * 3, out
    assert free["throttle"] == 0, out


def test_a_default_quota_holds_each_client_to_it_separately(broker: BrokerProcess) -> None:
    """client-id=<default>: every client id gets the quota for itself, as in Kafka (not one shared)."""
    assert alter(broker, [("client-id", None)], {"producer_byte_rate": QUOTA})[0] == 0
    try:
        out: dict[str, Any] = {}
        threads = [
            threading.Thread(target=_flood, args=(broker, cid, f"quota-{cid}", 10.0, 1 << 30, out))
            for cid in ("one", "two")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for cid in ("one", "two"):
            assert out[cid]["throttle"] > 0, out
            assert out[cid]["rate"] <= QUOTA * 1.5, out
        # Shared, the two would make one quota together.
        assert out["one"]["rate"] + out["two"]["rate"] >= QUOTA * 1.5, out
    finally:
        alter(broker, [("client-id", None)], {"producer_byte_rate": None})


def _metadata_rate(b: BrokerProcess, client_id: str, seconds: float, out: dict[str, float]) -> None:
    """Metadata requests answered per second for one client sending them back to back."""
    from kafka.protocol.metadata import MetadataRequest

    n = 0
    with RawClient(b.bootstrap, timeout=30, client_id=client_id) as c:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            c.request(MetadataRequest(topics=None), 12)
            n += 1
    out[client_id] = n / seconds


def test_a_request_percentage_quota_slows_only_its_client(broker: BrokerProcess) -> None:
    """request_percentage=1: 1 % of one thread, 10 ms of handler time per second, measured as the
    handler's own running time; the connection is muted while throttled."""
    assert alter(broker, [("client-id", "busy")], {"request_percentage": 1.0})[0] == 0
    try:
        out: dict[str, float] = {}
        threads = [
            threading.Thread(target=_metadata_rate, args=(broker, cid, 8.0, out)) for cid in ("busy", "calm")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert out["busy"] * 3 < out["calm"], out
    finally:
        alter(broker, [("client-id", "busy")], {"request_percentage": None})
