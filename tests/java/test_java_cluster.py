"""Apache Kafka's Java clients against a 3-broker Brook cluster: partition reassignment, the
idempotent producer through a kill -9 of a partition leader (nothing lost, duplicated or reordered),
preferred leader election, and each broker's log directory."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from tests.support.cluster import Cluster, eventually
from tests.support.jvm import JavaClients

from .test_java_consumer import consumer

pytestmark = [pytest.mark.slow, pytest.mark.needs_cluster]


def leaders(java: JavaClients, topic: str) -> dict[int, int]:
    desc = java.call("describe_topics", name="a", topics=[topic])[topic]
    return {p["partition"]: (p["leader"] or {"id": -1})["id"] for p in desc["partitions"]}


def test_reassign_partition(jcluster: Cluster, java: JavaClients) -> None:
    java.call("admin", name="a", config={"bootstrap.servers": jcluster.bootstrap})
    made = java.call("create_topics", name="a", topics=[{"name": "moving", "assignments": {"0": [0]}}])
    assert made == {"moving": "ok"}
    java.call("producer", name="p", config={"bootstrap.servers": jcluster.bootstrap})
    java.call("send", name="p", topic="moving", records=[{"value": str(i)} for i in range(100)])
    assert java.call("alter_reassignments", name="a", reassignments={"moving-0": [1, 2]}) == {
        "moving-0": "ok"
    }

    def moved() -> bool:
        desc = java.call("describe_topics", name="a", topics=["moving"])["moving"]["partitions"][0]
        return not java.call("list_reassignments", name="a") and [r["id"] for r in desc["replicas"]] == [1, 2]

    eventually(moved, 60, "moving-0 on brokers 1 and 2")
    assert leaders(java, "moving")[0] in (1, 2)
    consumer(java, "c", jcluster.bootstrap, "g-moving")
    java.call("assign", name="c", partitions=[["moving", 0]])
    assert [r["value"] for r in java.call("poll", name="c", count=100, timeout_ms=20000)] == [
        str(i) for i in range(100)
    ]
    for b in (1, 2):  # the new replicas hold the data; broker 0 no longer hosts it
        dirs = java.call("describe_log_dirs", name="a", brokers=[b])[str(b)]
        [d] = dirs.values()
        assert d["replicaInfos"]["moving-0"]["size"] > 0
    [d0] = java.call("describe_log_dirs", name="a", brokers=[0])["0"].values()
    assert "moving-0" not in d0["replicaInfos"]


def test_idempotent_producer_through_leader_kill_then_preferred_election(
    jcluster: Cluster, java: JavaClients
) -> None:
    java.call("admin", name="a", config={"bootstrap.servers": jcluster.bootstrap})
    assignments = {"0": [0, 1, 2], "1": [1, 2, 0], "2": [2, 0, 1]}
    made = java.call(
        "create_topics",
        name="a",
        topics=[{"name": "idem", "assignments": assignments, "configs": {"min.insync.replicas": "2"}}],
    )
    assert made == {"idem": "ok"}
    eventually(lambda: set(leaders(java, "idem").values()) == {0, 1, 2}, 30, "a leader per partition")
    java.call(
        "producer",
        name="p",
        config={
            "bootstrap.servers": jcluster.bootstrap,
            "acks": "all",
            "enable.idempotence": "true",
            "linger.ms": "5",
            "delivery.timeout.ms": "120000",
        },
    )
    java.call("send_background", name="p", topic="idem", count=12_000, rate=2000, prefix="r")
    time.sleep(2)
    victim = jcluster.broker(0)
    victim.kill()  # the leader of partition 0, mid-stream
    eventually(lambda: leaders(java, "idem")[0] in (1, 2), 30, "a new leader for idem-0")
    result = java.call("background_result", name="p", timeout_ms=150_000, timeout=160)
    assert result["errors"] == [], result["errors"][:5]
    acked = result["acked"]
    assert len(acked) == 12_000

    victim.start()
    consumer(java, "c", jcluster.bootstrap, "g-idem")
    java.call("subscribe", name="c", topics=["idem"])
    got = java.call("poll", name="c", count=12_000, timeout_ms=90_000, timeout=120)
    values = [r["value"] for r in got]
    assert len(values) == len(set(values)) == 12_000, (len(values), len(set(values)))
    # Each acknowledgement names the offset the record has in the log, and per partition the log
    # holds the records in the order they were sent.
    at = {(r["partition"], r["offset"]): r["value"] for r in got}
    assert all(at[(a["partition"], a["offset"])] == a["value"] for a in acked)
    by_partition: dict[int, list[int]] = defaultdict(list)
    for r in sorted(got, key=lambda r: (r["partition"], r["offset"])):
        by_partition[r["partition"]].append(int(r["value"].split("-")[1]))
    assert all(seq == sorted(seq) for seq in by_partition.values())

    # Broker 0 is back in sync: the preferred election gives idem-0 back to it.
    def in_sync() -> bool:
        desc = java.call("describe_topics", name="a", topics=["idem"])["idem"]["partitions"][0]
        return {n["id"] for n in desc["isr"]} == {0, 1, 2}

    eventually(in_sync, 60, "broker 0 back in idem-0's ISR")
    elected = java.call("elect_leaders", name="a", type="PREFERRED", partitions=[["idem", 0], ["idem", 1]])
    assert elected["idem-0"] is None and elected["idem-1"] == "ElectionNotNeededException", elected
    eventually(lambda: leaders(java, "idem")[0] == 0, 30, "broker 0 leading idem-0 again")
