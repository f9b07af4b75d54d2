"""Apache Kafka's Java consumer (classic group protocol) against a Brook broker: assignors, static
membership, seeks and offsets by time, commits, pause/resume, rebalance listeners, read_committed."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.support.broker import BrokerProcess
from tests.support.jvm import JavaClients

from .test_java_producer import create

pytestmark = pytest.mark.slow


def consumer(java: JavaClients, name: str, bootstrap: str, group: str, **config: str) -> None:
    java.call(
        "consumer",
        name=name,
        config={
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
            **config,
        },
    )


def poll_until(java: JavaClients, names: list[str], done: Any, timeout: float = 60.0) -> list[Any]:
    """Polls every consumer in turn (one thread drives them all, as a group needs each to poll
    during a rebalance) until `done()`; returns the records each got, by name order."""
    got: list[list[Any]] = [[] for _ in names]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i, n in enumerate(names):
            got[i] += java.call("poll", name=n, count=1_000_000, timeout_ms=200)
        if done():
            return got
    raise AssertionError(f"timed out; assignments {[java.call('assignment', name=n) for n in names]}")


def produce(java: JavaClients, bootstrap: str, topic: str, n: int, **fields: Any) -> list[Any]:
    java.call("producer", name=f"p-{topic}", config={"bootstrap.servers": bootstrap, "linger.ms": "5"})
    recs = [{"key": f"k{i}", "value": f"v{i}", **fields} for i in range(n)]
    out = java.call("send", name=f"p-{topic}", topic=topic, records=recs)
    java.call("close", name=f"p-{topic}")
    return list(out)


@pytest.mark.parametrize(
    "assignor",
    [
        "org.apache.kafka.clients.consumer.RangeAssignor",
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
    ],
)
def test_assignors_split_and_rebalance(jbroker: BrokerProcess, java: JavaClients, assignor: str) -> None:
    short = assignor.rsplit(".", 1)[1]
    topic, group = f"asg-{short}", f"g-{short}"
    create(java, jbroker.bootstrap, topic, partitions=6)
    produce(java, jbroker.bootstrap, topic, 120)
    strategy = {"partition.assignment.strategy": assignor}
    consumer(java, "c1", jbroker.bootstrap, group, **strategy)
    java.call("subscribe", name="c1", topics=[topic], listener=True)
    poll_until(java, ["c1"], lambda: len(java.call("assignment", name="c1")) == 6)
    java.call("events", name="c1")
    consumer(java, "c2", jbroker.bootstrap, group, **strategy)
    java.call("subscribe", name="c2", topics=[topic])

    def split() -> bool:
        a1, a2 = java.call("assignment", name="c1"), java.call("assignment", name="c2")
        return len(a1) == 3 and len(a2) == 3 and not set(a1) & set(a2)

    poll_until(java, ["c1", "c2"], split)
    revoked = [set(e["partitions"]) for e in java.call("events", name="c1") if e["event"] == "revoked"]
    if short == "CooperativeStickyAssignor":
        # Cooperative: c1 gives up only the three partitions that move, and never all six at once.
        assert set().union(*revoked) == {f"{topic}-{p}" for p in range(6)} - set(
            java.call("assignment", name="c1")
        ), revoked
    else:  # Eager: everything is revoked before the new assignment.
        assert {f"{topic}-{p}" for p in range(6)} in revoked, revoked
    java.call("admin", name="a", config={"bootstrap.servers": jbroker.bootstrap})
    desc = java.call("describe_groups", name="a", groups=[group])[group]
    assert desc["groupState"] == "STABLE" and len(desc["members"]) == 2, desc
    assert desc["partitionAssignor"] in ("range", "cooperative-sticky"), desc


def test_static_membership(jbroker: BrokerProcess, java: JavaClients) -> None:
    create(java, jbroker.bootstrap, "static", partitions=2)
    java.call("admin", name="a", config={"bootstrap.servers": jbroker.bootstrap})
    static = {"group.instance.id": "worker-1", "session.timeout.ms": "30000"}
    consumer(java, "c1", jbroker.bootstrap, "g-static", **static)
    java.call("subscribe", name="c1", topics=["static"])
    poll_until(java, ["c1"], lambda: len(java.call("assignment", name="c1")) == 2)
    desc = java.call("describe_groups", name="a", groups=["g-static"])["g-static"]
    assert [m["groupInstanceId"] for m in desc["members"]] == ["worker-1"], desc
    member_id = desc["members"][0]["consumerId"]
    # A static member's close leaves the group untouched (no LeaveGroup): it is still there, and a
    # restart with the same instance id takes its place without a new member id being added.
    java.call("close", name="c1")
    desc = java.call("describe_groups", name="a", groups=["g-static"])["g-static"]
    assert [m["consumerId"] for m in desc["members"]] == [member_id], desc
    consumer(java, "c1b", jbroker.bootstrap, "g-static", **static)
    java.call("subscribe", name="c1b", topics=["static"])
    poll_until(java, ["c1b"], lambda: len(java.call("assignment", name="c1b")) == 2)
    desc = java.call("describe_groups", name="a", groups=["g-static"])["g-static"]
    assert [m["groupInstanceId"] for m in desc["members"]] == ["worker-1"], desc
    java.call("close", name="c1b")
    # The admin removes the static member by instance id; the group is then empty.
    java.call("remove_members", name="a", group="g-static", instance_ids=["worker-1"])
    desc = java.call("describe_groups", name="a", groups=["g-static"])["g-static"]
    assert desc["members"] == [] and desc["groupState"] == "EMPTY", desc


def test_seek_times_commits_pause(jbroker: BrokerProcess, java: JavaClients) -> None:
    create(java, jbroker.bootstrap, "seek", partitions=1)
    base = int(time.time() * 1000) - 100_000
    java.call("producer", name="p", config={"bootstrap.servers": jbroker.bootstrap})
    recs = [{"key": f"k{i}", "value": f"v{i}", "timestamp": base + i * 1000} for i in range(20)]
    java.call("send", name="p", topic="seek", records=recs)
    consumer(java, "c", jbroker.bootstrap, "g-seek")
    tp = ["seek", 0]
    java.call("assign", name="c", partitions=[tp])
    times = java.call("offsets_for_times", name="c", partitions=[tp], timestamp=base + 7500)
    assert times == {"seek-0": {"offset": 8, "timestamp": base + 8000}}
    assert java.call("offsets_for_times", name="c", partitions=[tp], timestamp=base + 10**9) == {
        "seek-0": None
    }
    assert java.call("beginning_offsets", name="c", partitions=[tp]) == {"seek-0": 0}
    assert java.call("end_offsets", name="c", partitions=[tp]) == {"seek-0": 20}
    java.call("seek", name="c", partition=tp, offset=15)
    got = java.call("poll", name="c", count=5, timeout_ms=20000)
    assert [r["offset"] for r in got] == [15, 16, 17, 18, 19]
    assert java.call("position", name="c", partition=tp) == 20
    java.call("commit_sync", name="c", offsets={"seek": {"0": 12}})
    assert java.call("committed", name="c", partitions=[tp]) == {"seek-0": 12}
    java.call("seek", name="c", partition=tp, offset=3)
    assert [r["offset"] for r in java.call("poll", name="c", count=17, timeout_ms=20000)][:2] == [3, 4]
    assert java.call("commit_async", name="c") == {"seek-0": {"leaderEpoch": 0, "metadata": "", "offset": 20}}
    assert java.call("committed", name="c", partitions=[tp]) == {"seek-0": 20}
    # Paused: polls return nothing new while records arrive; resumed: they come.
    java.call("pause", name="c", partitions=[tp])
    assert java.call("paused", name="c") == ["seek-0"]
    java.call("send", name="p", topic="seek", records=[{"value": "late"}])
    assert java.call("poll", name="c", count=1, timeout_ms=1500) == []
    java.call("resume", name="c", partitions=[tp])
    assert [r["value"] for r in java.call("poll", name="c", count=1, timeout_ms=20000)] == ["late"]


def test_read_committed_stops_at_open_transaction(jbroker: BrokerProcess, java: JavaClients) -> None:
    create(java, jbroker.bootstrap, "rc", partitions=1)
    produce(java, jbroker.bootstrap, "rc", 5)
    java.call(
        "producer",
        name="tx",
        config={"bootstrap.servers": jbroker.bootstrap, "transactional.id": "rc-tx"},
    )
    java.call("init_transactions", name="tx")
    java.call("begin_transaction", name="tx")
    java.call("send", name="tx", topic="rc", records=[{"value": f"t{i}"} for i in range(3)])
    tp = ["rc", 0]
    consumer(java, "rc", jbroker.bootstrap, "g-rc", **{"isolation.level": "read_committed"})
    java.call("assign", name="rc", partitions=[tp])
    got = java.call("poll", name="rc", count=8, timeout_ms=3000)
    assert [r["value"] for r in got] == [f"v{i}" for i in range(5)]
    # The last stable offset is 5 while the transaction is open: the end offset and lag say so.
    assert java.call("end_offsets", name="rc", partitions=[tp]) == {"rc-0": 5}
    assert java.call("current_lag", name="rc", partition=tp) == 0
    java.call("commit_transaction", name="tx")
    got = java.call("poll", name="rc", count=3, timeout_ms=20000)
    assert [r["value"] for r in got] == ["t0", "t1", "t2"]
    assert java.call("end_offsets", name="rc", partitions=[tp]) == {"rc-0": 9}  # 3 records + the marker
