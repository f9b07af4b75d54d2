"""A share group's start offsets in a 3-broker cluster, where its share-partitions live with partition
leaders other than the group's coordinator: kafka-share-groups.sh describes, resets and deletes them
through the coordinator, which asks each leader (the share-state RPCs), and a consumer afterwards
gets exactly what the reset says."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType
from confluent_kafka.admin import AdminClient

from tests.conftest import GROUP_ARGS
from tests.integration.test_share_groups import (
    create_topic_rf,
    group_configs,
    produce,
    share_consumer,
)
from tests.support.cluster import Cluster
from tests.support.jvm import kafka_tool

pytestmark = [pytest.mark.slow, pytest.mark.needs_cluster]


def test_offsets_of_partitions_led_elsewhere(tmp_path: Path) -> None:
    c = Cluster(tmp_path, extra_args=GROUP_ARGS).start()
    try:
        b = c.bootstrap
        create_topic_rf(b, "O", 3, 3)
        leaders = {p.leader for p in AdminClient({"bootstrap.servers": b}).list_topics("O", timeout=10)
                   .topics["O"].partitions.values()}  # fmt: skip
        assert len(leaders) == 3  # so two of the three are led by another broker than the coordinator
        group_configs(b, "g", share_auto_offset_reset="earliest")
        produce(b, "O", [f"o{i}".encode() for i in range(30)], partitions=3)
        s = share_consumer(b, "g", "O")
        try:
            got: set[tuple[int, int]] = set()  # distinct: a released record comes back
            deadline = time.monotonic() + 60
            while len(got) < 30:
                assert time.monotonic() < deadline, f"{len(got)} of 30 records"
                for m in [m for m in s.poll(0.5) if m.error() is None]:
                    s.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 4 else AcknowledgeType.RELEASE)
                    got.add((m.partition() or 0, m.offset() or 0))
                s.commit_sync(15)
        finally:
            s.close()

        def tool(*args: str) -> list[list[str]]:
            r = kafka_tool("kafka-share-groups", "--bootstrap-server", b, *args, check=True)
            return [ln.split() for ln in r.stdout.splitlines() if ln.strip()]

        # GROUP TOPIC PARTITION START-OFFSET LAG
        assert sorted(tool("--describe", "--group", "g")[1:]) == [
            ["g", "O", str(p), "4", "6"] for p in range(3)
        ]
        tool("--reset-offsets", "--group", "g", "--topic", "O", "--to-offset", "8", "--execute")
        assert sorted(tool("--describe", "--group", "g")[1:]) == [
            ["g", "O", str(p), "8", "2"] for p in range(3)
        ]
        # each leader took the reset: offsets 8 and 9 of every partition, delivered afresh
        assert read_all(b, 6) == [(p, o, 1) for p in range(3) for o in (8, 9)]
        tool("--delete-offsets", "--group", "g", "--topic", "O")
        assert tool("--describe", "--group", "g") == [
            ["Share", "group", "'g'", "has", "no", "offset", "information."]
        ]
        # Every leader forgot its share-partition: the group starts over at the earliest offset. Then
        # DeleteGroups: the same again.
        assert read_all(b) == [(p, o, 1) for p in range(3) for o in range(10)]
        tool("--delete", "--group", "g")
        group_configs(b, "g", share_auto_offset_reset="earliest")
        assert read_all(b) == [(p, o, 1) for p in range(3) for o in range(10)]
    finally:
        c.stop()


def read_all(b: str, want: int = 30) -> list[tuple[int, int, int]]:
    """The records of O the group gets (up to `want`, within 15 s), accepted: (partition, offset,
    delivery count)."""
    s = share_consumer(b, "g", "O")
    try:
        seen: list[tuple[int, int, int]] = []
        deadline = time.monotonic() + 15
        while len(seen) < want and time.monotonic() < deadline:
            for m in [m for m in s.poll(0.5) if m.error() is None]:
                s.acknowledge(m, AcknowledgeType.ACCEPT)
                seen.append((m.partition() or 0, m.offset() or 0, m.delivery_count() or 0))
            s.commit_sync(15)
        return sorted(seen)
    finally:
        s.close()


def test_acknowledgements_of_many_partitions_are_all_stored(tmp_path: Path) -> None:
    """A leader stores the states of its share-partitions in `__share_group_state` partitions led by
    other brokers, many at once (each acknowledgement is stored before it is answered). Every accepted
    record stays accepted: none comes back once the acquisition lock (2 s here) has run out. The
    stores to one broker once shared a connection without waiting their turn, and all but one failed
    (a correlation id mismatch); their records were delivered again (librdkafka's 0172 and 0174)."""
    c = Cluster(tmp_path, extra_args=GROUP_ARGS).start()
    try:
        b = c.bootstrap
        create_topic_rf(b, "M", 24, 3)
        group_configs(b, "g", share_auto_offset_reset="earliest", share_record_lock_duration_ms="2000")
        produce(b, "M", [f"m{i}".encode() for i in range(240)], partitions=24)
        s = share_consumer(b, "g", "M")
        try:
            got: set[tuple[int, int]] = set()
            deadline = time.monotonic() + 60
            while len(got) < 240:
                assert time.monotonic() < deadline, f"{len(got)} of 240 records"
                for m in [m for m in s.poll(0.5) if m.error() is None]:
                    assert m.delivery_count() == 1, (m.partition(), m.offset(), m.delivery_count())
                    s.acknowledge(m, AcknowledgeType.ACCEPT)
                    got.add((m.partition() or 0, m.offset() or 0))
                s.commit_sync(15)
            time.sleep(3)  # past the locks: an acknowledgement lost would deliver its record again
            again: list[tuple[int, int, int]] = []
            for _ in range(6):
                again += [(m.partition() or 0, m.offset() or 0, m.delivery_count() or 0)
                          for m in s.poll(0.5) if m.error() is None]  # fmt: skip
        finally:
            s.close()
        assert again == [], f"{len(again)} accepted records delivered again, e.g. {again[:5]}"
    finally:
        c.stop()
