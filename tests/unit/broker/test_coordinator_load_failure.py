"""A broker that becomes the leader of a `__consumer_offsets` partition whose log cannot be read (the
disk returns EIO: the log directory goes offline and the broker leaves) logs it and goes on applying
the metadata; it was an exception out of the metadata watch, with a traceback at ERROR, and the
rest of that batch of changes waited for a full re-read of the cluster state."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from brook.broker.cluster import ClusterNode
from brook.protocol.errors import ErrorCode, KafkaError


class Led:
    is_leader = False

    def become_leader(self, role: Any) -> None:
        self.is_leader = True


def test_a_coordinator_partition_that_cannot_be_read(caplog: pytest.LogCaptureFixture) -> None:
    def load(topic: str, index: int) -> None:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "read of __consumer_offsets-4 failed: [EIO]")

    partition = Led()
    node: Any = SimpleNamespace(
        node_id=1,
        broker=SimpleNamespace(
            replicas=SimpleNamespace(local_partition=lambda t, i: partition),
            coordinator_partition_loaded=load,
        ),
        topics={"__consumer_offsets": SimpleNamespace(assignment=[[1, 2, 3]] * 5)},
        states={("__consumer_offsets", 4): SimpleNamespace(leader=1, leader_epoch=3, isr=[1, 2], version=7)},
        _unfollow=lambda p: None,
    )
    with caplog.at_level(logging.WARNING):
        ClusterNode._apply_role(node, "__consumer_offsets", 4)
    assert partition.is_leader
    assert "its coordinator could not load it" in caplog.text
