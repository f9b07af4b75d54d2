"""Apache Kafka's Java transactional producer against a Brook broker: consume-transform-produce with
sendOffsetsToTransaction through a kill -9 of the processor, zombie fencing, transaction timeouts."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import GROUP_ARGS
from tests.support.broker import BrokerProcess
from tests.support.jvm import JavaClients, JavaError

from .test_java_consumer import consumer
from .test_java_producer import create

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def txbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("txbroker") / "data",
        args=[
            *GROUP_ARGS,
            "--auto-create-topics",
            "false",
            "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
            "300",
        ],
    ).start()
    try:
        yield b
    finally:
        b.stop()


def start_processor(java: JavaClients, bootstrap: str, tid: str) -> None:
    java.call(
        "producer",
        name="out",
        config={"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": "60000"},
    )
    java.call("init_transactions", name="out")
    # A short session: the killed processor's member leaves the group in seconds, not Kafka's 45 s.
    consumer(
        java,
        "in",
        bootstrap,
        "g-ctp",
        **{"isolation.level": "read_committed", "max.poll.records": "10", "session.timeout.ms": "6000"},
    )
    java.call("subscribe", name="in", topics=["ctp-in"])


def process_once(java: JavaClients, commit: bool = True, out_topic: str = "ctp-out") -> int:
    """One transaction: up to 10 inputs → their upper-cased copies + the inputs' offsets."""
    batch = java.call("poll", name="in", count=1, timeout_ms=5000)
    if not batch:
        return 0
    java.call("begin_transaction", name="out")
    out = [{"key": r["key"], "value": r["value"].upper()} for r in batch]
    assert all("error" not in r for r in java.call("send", name="out", topic=out_topic, records=out))
    last: dict[str, dict[str, int]] = {}
    for r in batch:
        last.setdefault(r["topic"], {})[str(r["partition"])] = r["offset"] + 1
    java.call("send_offsets_to_transaction", name="out", consumer="in", offsets=last)
    if commit:
        java.call("commit_transaction", name="out")
    return len(batch)


def test_consume_transform_produce_exactly_once_through_kill(txbroker: BrokerProcess, tmp_path: Path) -> None:
    with JavaClients(tmp_path / "setup.log") as java:
        create(java, txbroker.bootstrap, "ctp-in", partitions=2)
        create(java, txbroker.bootstrap, "ctp-out", partitions=2)
        java.call("producer", name="src", config={"bootstrap.servers": txbroker.bootstrap})
        inputs = [{"key": f"k{i}", "value": f"in-{i}"} for i in range(200)]
        assert all("error" not in r for r in java.call("send", name="src", topic="ctp-in", records=inputs))

    first = JavaClients(tmp_path / "first.log")
    start_processor(first, txbroker.bootstrap, "ctp-1")
    done = 0
    while done < 60:
        done += process_once(first)
    # Mid-transaction: outputs written and offsets sent, not committed; then the process dies.
    assert process_once(first, commit=False) > 0
    first.proc.kill()
    first.proc.wait()
    first.close()

    with JavaClients(tmp_path / "second.log") as second:
        start_processor(second, txbroker.bootstrap, "ctp-1")  # aborts the dead one's transaction
        second.call("admin", name="a", config={"bootstrap.servers": txbroker.bootstrap})

        def committed() -> int:
            return sum(v or 0 for v in second.call("list_group_offsets", name="a", group="g-ctp").values())

        deadline = time.monotonic() + 90
        while committed() < 200:
            assert time.monotonic() < deadline, f"inputs committed: {committed()} of 200"
            process_once(second)
        consumer(second, "check", txbroker.bootstrap, "g-check", **{"isolation.level": "read_committed"})
        second.call("subscribe", name="check", topics=["ctp-out"])
        got = second.call("poll", name="check", count=10_000, timeout_ms=8000)
        counts = Counter(r["value"] for r in got)
        assert set(counts) == {f"IN-{i}" for i in range(200)}, sorted(
            set(counts) ^ {f"IN-{i}" for i in range(200)}
        )
        assert [v for v, n in counts.items() if n > 1] == []
        # The aborted transaction's records are in the log, below read_committed's view.
        consumer(second, "raw", txbroker.bootstrap, "g-raw")
        second.call("subscribe", name="raw", topics=["ctp-out"])
        uncommitted = second.call("poll", name="raw", count=10_000, timeout_ms=8000)
        assert len(uncommitted) > len(got)


def test_zombie_is_fenced(txbroker: BrokerProcess, java: JavaClients) -> None:
    create(java, txbroker.bootstrap, "zombie", partitions=1)
    cfg = {"bootstrap.servers": txbroker.bootstrap, "transactional.id": "zombie-tx"}
    java.call("producer", name="old", config=cfg)
    java.call("init_transactions", name="old")
    java.call("begin_transaction", name="old")
    java.call("send", name="old", topic="zombie", records=[{"value": "from-old"}])
    java.call("producer", name="new", config=cfg)
    java.call("init_transactions", name="new")  # bumps the epoch: "old" is now a zombie
    # Its write is refused by the partition's leader (an old epoch: INVALID_PRODUCER_EPOCH, as Kafka
    # answers a produce since 2.7), and ending its transaction by the coordinator (PRODUCER_FENCED).
    out = java.call("send", name="old", topic="zombie", records=[{"value": "zombie-write"}])
    assert out[0].get("error") == "InvalidProducerEpochException", out
    with pytest.raises(JavaError):
        java.call("commit_transaction", name="old")
    with pytest.raises(JavaError) as e:
        java.call("abort_transaction", name="old")
    assert e.value.kind == "ProducerFencedException", e.value
    java.call("begin_transaction", name="new")
    java.call("send", name="new", topic="zombie", records=[{"value": "from-new"}])
    java.call("commit_transaction", name="new")
    consumer(java, "c", txbroker.bootstrap, "g-zombie", **{"isolation.level": "read_committed"})
    java.call("assign", name="c", partitions=[["zombie", 0]])
    assert [r["value"] for r in java.call("poll", name="c", count=5, timeout_ms=4000)] == ["from-new"]


def test_transaction_timeout_aborts(txbroker: BrokerProcess, java: JavaClients) -> None:
    create(java, txbroker.bootstrap, "slowtx", partitions=1)
    cfg = {
        "bootstrap.servers": txbroker.bootstrap,
        "transactional.id": "slow-tx",
        "transaction.timeout.ms": "1500",
    }
    java.call("producer", name="p", config=cfg)
    java.call("init_transactions", name="p")
    java.call("begin_transaction", name="p")
    java.call("send", name="p", topic="slowtx", records=[{"value": "too-late"}])
    consumer(java, "c", txbroker.bootstrap, "g-slow", **{"isolation.level": "read_committed"})
    java.call("assign", name="c", partitions=[["slowtx", 0]])
    # The coordinator aborts it once the timeout passes: the LSO moves past the marker while the
    # producer is still idle, and its commit is then refused.
    java.call("poll", name="c", count=1, timeout_ms=4000)
    assert java.call("end_offsets", name="c", partitions=[["slowtx", 0]]) == {"slowtx-0": 2}
    with pytest.raises(JavaError) as e:
        java.call("commit_transaction", name="p")
    assert e.value.kind in ("ProducerFencedException", "InvalidProducerEpochException"), e.value
    assert java.call("poll", name="c", count=1, timeout_ms=1000) == []


def test_offsets_in_a_transaction_from_a_consumer_protocol_member(
    txbroker: BrokerProcess, java: JavaClients
) -> None:
    """sendOffsetsToTransaction with the groupMetadata of a KIP-848 consumer (group.protocol=consumer):
    TxnOffsetCommit names the member and its member epoch, which the coordinator checks as Kafka does
    and then commits with the transaction."""
    b = txbroker.bootstrap
    create(java, b, "kip848-in", partitions=2)
    create(java, b, "kip848-out", partitions=2)
    java.call("producer", name="src848", config={"bootstrap.servers": b})
    inputs = [{"key": f"k{i}", "value": f"in-{i}"} for i in range(30)]
    assert all("error" not in r for r in java.call("send", name="src848", topic="kip848-in", records=inputs))
    java.call("producer", name="out", config={"bootstrap.servers": b, "transactional.id": "kip848-tx"})
    java.call("init_transactions", name="out")
    consumer(
        java,
        "in",
        b,
        "g-kip848",
        **{"isolation.level": "read_committed", "max.poll.records": "10", "group.protocol": "consumer"},
    )
    java.call("subscribe", name="in", topics=["kip848-in"])
    java.call("admin", name="a848", config={"bootstrap.servers": b})
    done, deadline = 0, time.monotonic() + 60
    while done < 30:
        assert time.monotonic() < deadline, f"{done} of 30 processed"
        done += process_once(java, out_topic="kip848-out")
    committed = java.call("list_group_offsets", name="a848", group="g-kip848")
    assert sum(v or 0 for v in committed.values()) == 30
