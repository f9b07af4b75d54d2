"""The data source's offset look-ups while a partition has no leader, against real brokers.

librdkafka answers such a look-up with an error or with its OFFSET_INVALID marker (-1001); the source
once took the marker for an offset ("offsets -1001..-1 are no longer available"). The helpers must
wait for a leader within a bound and then give real offsets, or fail with a clear error; never -1001.
No Spark needed: these are the driver's and the executors' helpers on their own.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster, eventually

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.slow]

from pyspark_brook.kafka import BrookOffsetsUnavailableError, watermarks  # noqa: E402
from pyspark_brook.kafka import Cluster as Offsets  # noqa: E402

RECORDS = 50


def fill(bootstrap: str, topic: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for part in range(partitions):
        for i in range(RECORDS):
            p.produce(topic, b"%d" % i, partition=part)
    assert p.flush(30) == 0


def consumer(bootstrap: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets-test", "enable.auto.commit": False})


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "cluster").start()
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.needs_cluster
def test_offsets_asked_while_the_leader_is_dead_come_from_the_next_leader(cluster: Cluster) -> None:
    fill(cluster.bootstrap, "fo", 3, 3)
    bootstrap = cluster.bootstrap
    offsets = Offsets({"bootstrap.servers": bootstrap})
    cons = consumer(bootstrap)
    tps = [("fo", p) for p in range(3)]
    assert offsets.latest(tps) == {tp: RECORDS for tp in tps}  # clients know the leaders now
    leader = AdminClient({"bootstrap.servers": bootstrap}).list_topics("fo", timeout=10).topics["fo"]
    assert watermarks(cons, TopicPartition("fo", 0)) == (0, RECORDS)
    cluster.broker(leader.partitions[0].leader).kill()
    # No leader for partition 0 until the dead broker's lease (2 s) runs out and the controller acts;
    # and both clients have the dead one cached as its leader.
    assert watermarks(cons, TopicPartition("fo", 0)) == (0, RECORDS)
    assert offsets.latest(tps) == {tp: RECORDS for tp in tps}
    assert offsets.earliest(tps) == {tp: 0 for tp in tps}
    cons.close()


def test_a_partition_without_a_leader_for_too_long_is_a_clear_error(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", args=["--num-partitions", "1"]).start()
    try:
        fill(broker.bootstrap, "frozen", 1, 1)
        offsets = Offsets({"bootstrap.servers": broker.bootstrap}, timeout_s=3)
        cons = consumer(broker.bootstrap)
        assert watermarks(cons, TopicPartition("frozen", 0)) == (0, RECORDS)
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(BrookOffsetsUnavailableError, match="frozen-0"):
                offsets.latest([("frozen", 0)])
            with pytest.raises(BrookOffsetsUnavailableError, match="frozen-0"):
                watermarks(cons, TopicPartition("frozen", 0), timeout_s=3)
            assert time.monotonic() - started < 30
        finally:
            broker.proc.send_signal(signal.SIGCONT)
        # The same helpers answer as soon as the broker is back.
        assert eventually(lambda: offsets.latest([("frozen", 0)]), 20) == {("frozen", 0): RECORDS}
        assert watermarks(cons, TopicPartition("frozen", 0)) == (0, RECORDS)
        cons.close()
    finally:
        broker.stop()


def test_json_offsets_take_no_librdkafka_marker() -> None:
    """-2 and -1 are Spark's sentinels; -1001 and the like are no offset and no position to read from."""
    from pyspark_brook.options import BrookOptionError, parse_offsets

    assert parse_offsets("startingOffsets", '{"t": {"0": -2, "1": -1, "2": 7}}', "earliest") == {
        "t": {0: -2, 1: -1, 2: 7}
    }
    for bad in (-1001, -1000, -3):
        with pytest.raises(BrookOptionError, match=f"t-0: {bad} is not an offset"):
            parse_offsets("startingOffsets", json.dumps({"t": {"0": bad}}), "earliest")
    with pytest.raises(BrookOptionError, match="t-0: -2 is not an offset"):
        parse_offsets("endingOffsets", '{"t": {"0": -2}}', "latest")
    with pytest.raises(BrookOptionError, match="must be integers"):
        parse_offsets("startingOffsets", '{"t": {"0": "soon"}}', "earliest")
