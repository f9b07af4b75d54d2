"""Apache Kafka's Java producer against a Brook broker: acks, compression, headers, sizes, refusals."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker import BrokerProcess
from tests.support.delay_proxy import DelayProxy
from tests.support.jvm import JavaClients

pytestmark = pytest.mark.slow


def create(java: JavaClients, bootstrap: str, topic: str, partitions: int = 3, **configs: str) -> None:
    java.call("admin", name="admin", config={"bootstrap.servers": bootstrap})
    out = java.call(
        "create_topics",
        name="admin",
        topics=[{"name": topic, "partitions": partitions, "replication_factor": 1, "configs": configs}],
    )
    assert out == {topic: "ok"}, out


def consume_all(java: JavaClients, bootstrap: str, topic: str, count: int, **config: str) -> list[Any]:
    name = f"c-{topic}"
    java.call(
        "consumer",
        name=name,
        config={"bootstrap.servers": bootstrap, "group.id": name, "auto.offset.reset": "earliest", **config},
    )
    java.call("subscribe", name=name, topics=[topic])
    records = java.call("poll", name=name, count=count, timeout_ms=30000)
    java.call("close", name=name)
    return list(records)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(jbroker: BrokerProcess, java: JavaClients, acks: str) -> None:
    topic = f"acks-{acks}"
    create(java, jbroker.bootstrap, topic)
    java.call("producer", name="p", config={"bootstrap.servers": jbroker.bootstrap, "acks": acks})
    sent = [{"key": f"k{i}", "value": f"v{i}"} for i in range(60)]
    results = java.call("send", name="p", topic=topic, records=sent)
    assert all("error" not in r for r in results), results
    if acks == "0":  # no answer, so the client knows no offset
        assert {r["offset"] for r in results} == {-1}
    else:  # one partition per key, offsets dense from 0 on each
        by_partition: dict[int, list[int]] = {}
        for r in results:
            by_partition.setdefault(r["partition"], []).append(r["offset"])
        assert all(offs == list(range(len(offs))) for offs in by_partition.values()), by_partition
    java.call("flush", name="p")
    got = consume_all(java, jbroker.bootstrap, topic, len(sent))
    assert sorted((r["key"], r["value"]) for r in got) == sorted((s["key"], s["value"]) for s in sent)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression(jbroker: BrokerProcess, java: JavaClients, codec: str) -> None:
    topic = f"codec-{codec}"
    create(java, jbroker.bootstrap, topic, partitions=1)
    java.call(
        "producer",
        name="p",
        config={"bootstrap.servers": jbroker.bootstrap, "compression.type": codec, "linger.ms": "50"},
    )
    sent = [{"key": f"k{i}", "value": f"value {i} " * 20} for i in range(300)]
    results = java.call("send", name="p", topic=topic, records=sent)
    assert [r["offset"] for r in results] == list(range(300))
    got = consume_all(java, jbroker.bootstrap, topic, len(sent))
    assert [(r["offset"], r["value"]) for r in got] == [(i, s["value"]) for i, s in enumerate(sent)]


def test_headers_and_timestamps(jbroker: BrokerProcess, java: JavaClients) -> None:
    create(java, jbroker.bootstrap, "headers", partitions=1)
    java.call("producer", name="p", config={"bootstrap.servers": jbroker.bootstrap})
    sent = [
        {"key": "a", "value": "1", "headers": {"trace": "t-1", "empty": "", "none": None}, "timestamp": 1000},
        {"key": None, "value": None, "headers": {}, "timestamp": 2000},
        {"key": "c", "value": "3", "headers": {"ü-key": "wert ü"}, "timestamp": 3000},
    ]
    assert [r["timestamp"] for r in java.call("send", name="p", topic="headers", records=sent)] == [
        1000,
        2000,
        3000,
    ]
    got = consume_all(java, jbroker.bootstrap, "headers", 3)
    assert [(r["key"], r["value"], r["headers"], r["timestamp"]) for r in got] == [
        ("a", "1", {"trace": "t-1", "empty": "", "none": None}, 1000),
        (None, None, {}, 2000),
        ("c", "3", {"ü-key": "wert ü"}, 3000),
    ]


def test_record_near_and_over_max_message_bytes(jbroker: BrokerProcess, java: JavaClients) -> None:
    limit = 200_000
    create(java, jbroker.bootstrap, "big", partitions=1, **{"max.message.bytes": str(limit)})
    # The client's own limit is far above the topic's, so only the broker can refuse.
    java.call(
        "producer",
        name="p",
        config={"bootstrap.servers": jbroker.bootstrap, "max.request.size": "5000000", "retries": "0"},
    )
    near = java.call("send", name="p", topic="big", records=[{"key": "k", "value_size": limit - 200}])
    assert near == [{"partition": 0, "offset": 0, "timestamp": near[0]["timestamp"]}]
    over = java.call("send", name="p", topic="big", records=[{"key": "k", "value_size": limit + 1000}])
    assert over[0]["error"] == "RecordTooLargeException", over
    # The broker's MESSAGE_TOO_LARGE with its message, not the client's own check ("... when serialized").
    assert "max.message.bytes=200000" in over[0]["message"], over
    got = consume_all(java, jbroker.bootstrap, "big", 1, **{"max.partition.fetch.bytes": "1000000"})
    assert [(r["offset"], r["value_size"]) for r in got] == [(0, limit - 200)]


def test_unknown_topic_not_created(jbroker: BrokerProcess, java: JavaClients) -> None:
    java.call("producer", name="p", config={"bootstrap.servers": jbroker.bootstrap, "max.block.ms": "3000"})
    out = java.call("send", name="p", topic="no-such-topic", records=[{"value": "x"}])
    assert out[0]["error"] == "TimeoutException", out
    assert "not present in metadata" in out[0]["message"]
    java.call("admin", name="a", config={"bootstrap.servers": jbroker.bootstrap})
    assert "no-such-topic" not in java.call("list_topics", name="a")


def test_idempotent_retries_are_written_once(tmp_path: Path, java: JavaClients) -> None:
    """Responses held back past request.timeout.ms: the Java producer retries batches the broker has
    already written (same producer id and sequences), and the broker must answer them as duplicates."""
    broker = BrokerProcess(tmp_path / "data")
    proxy = DelayProxy(("127.0.0.1", broker.port))
    # Clients reach the broker only through the proxy: it is the address the broker advertises.
    broker.args = ["--advertised-port", str(proxy.port), "--auto-create-topics", "false"]
    broker.start()
    try:
        create(java, proxy.endpoint, "retried", partitions=1)
        java.call(
            "producer",
            name="p",
            config={
                "bootstrap.servers": proxy.endpoint,
                "acks": "all",
                "enable.idempotence": "true",
                "request.timeout.ms": "1500",
                "delivery.timeout.ms": "60000",
                "retry.backoff.ms": "200",
            },
        )
        java.call("send", name="p", topic="retried", records=[{"value": "warm-up"}])
        proxy.delay_s = 2.5
        java.call("send_background", name="p", topic="retried", count=40, rate=20, prefix="r")
        time.sleep(5)  # every request in this window is written, then timed out and sent again
        proxy.delay_s = 0
        result = java.call("background_result", name="p", timeout_ms=60_000)
        assert result["errors"] == [] and len(result["acked"]) == 40, result
        got = consume_all(java, proxy.endpoint, "retried", 41)
        values = [r["value"] for r in got]
        assert values == ["warm-up", *(f"r-{i}" for i in range(40))], values
        assert [r["offset"] for r in got] == list(range(41))
    finally:
        broker.stop()
        proxy.close()
