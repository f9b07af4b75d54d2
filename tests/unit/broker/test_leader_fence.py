"""A leader whose lease may have expired in etcd acknowledges nothing (brook.broker.leader_fence)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from brook.broker.leader_fence import LeaderFence
from brook.broker.partition import Partition, PartitionRole
from brook.config import TopicConfig
from brook.log import PartitionLog
from brook.protocol.errors import ErrorCode, KafkaError
from tests.support.records import batch


def leader(path: Path, fence: LeaderFence) -> Partition:
    p = Partition("t", 0, PartitionLog.open(path, TopicConfig()), node_id=1, leads=False, fence=fence)
    p.become_leader(PartitionRole(1, 0, [1], [1], 1))
    return p


def test_a_fenced_leader_refuses_appends_and_acks_and_takes_them_again_with_a_lease(tmp_path: Path) -> None:
    lease = [time.monotonic() + 60]
    fence = LeaderFence()
    fence.bind(lambda: lease[0])
    p = leader(tmp_path, fence)
    assert p.append(memoryview(batch([b"a"]))).base_offset == 0
    assert p.committed(0, 0)
    lease[0] = time.monotonic() - 0.001  # the lease's deadline has passed
    for call in (lambda: p.append(memoryview(batch([b"b"]))), lambda: p.committed(0, 0)):
        with pytest.raises(KafkaError) as e:
            call()
        assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p.log.log_end_offset == 1  # nothing written while fenced
    lease[0] = time.monotonic() + 60  # registered again, view caught up
    assert p.append(memoryview(batch([b"c"]))).base_offset == 1
