"""Group and offset API misuse gets Kafka's error codes (raw socket, kafka-python's encoder)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from brook.protocol.errors import ErrorCode
from tests.integration.test_clients import create_topic
from tests.support.broker import BrokerProcess
from tests.support.raw import RawClient

pytestmark = pytest.mark.slow
J = JoinGroupRequest


def join(
    c: RawClient,
    group: str,
    member_id: str = "",
    protocols: list[tuple[str, bytes]] | None = None,
    protocol_type: str = "consumer",
) -> Any:
    req = J(
        group_id=group,
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type=protocol_type,
        protocols=[
            J.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in (protocols or [("range", b"")])
        ],
    )
    return c.request(req, 5)


def join_member(c: RawClient, group: str, protocols: list[tuple[str, bytes]] | None = None) -> Any:
    """The KIP-394 two-step join: MEMBER_ID_REQUIRED, then the real join."""
    first = join(c, group, protocols=protocols)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    return join(c, group, first.member_id, protocols)


def sync(c: RawClient, group: str, generation: int, member_id: str) -> Any:
    S = SyncGroupRequest
    return c.request(
        S(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=None,
            assignments=[S.SyncGroupRequestAssignment(member_id=member_id, assignment=b"a")],
        ),
        3,
    )


def heartbeat(c: RawClient, group: str, generation: int, member_id: str) -> int:
    r = c.request(
        HeartbeatRequest(
            group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None
        ),
        3,
    )
    return int(r.error_code)


def stable_member(c: RawClient, group: str) -> tuple[str, int]:
    c.request(FindCoordinatorRequest(key=group, key_type=0), 2)
    r = join_member(c, group)
    assert r.error_code == 0
    assert sync(c, group, r.generation_id, r.member_id).error_code == 0
    return r.member_id, r.generation_id


def test_empty_group_id_is_invalid(gbroker: BrokerProcess) -> None:
    with RawClient(gbroker.bootstrap) as c:
        assert join(c, "").error_code == ErrorCode.INVALID_GROUP_ID
        OC = OffsetCommitRequest
        r = c.request(
            OC(
                group_id="",
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=[
                    OC.OffsetCommitRequestTopic(
                        name="x",
                        partitions=[
                            OC.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                partition_index=0,
                                committed_offset=1,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            )
                        ],
                    )
                ],
            ),
            7,
        )
        assert r.topics[0].partitions[0].error_code == ErrorCode.INVALID_GROUP_ID


def test_unknown_member_and_stale_generation(gbroker: BrokerProcess) -> None:
    with RawClient(gbroker.bootstrap) as c:
        member, gen = stable_member(c, "gerr1")
        assert heartbeat(c, "gerr1", gen, member) == ErrorCode.NONE
        assert heartbeat(c, "gerr1", gen, "not-a-member") == ErrorCode.UNKNOWN_MEMBER_ID
        assert heartbeat(c, "gerr1", gen - 1, member) == ErrorCode.ILLEGAL_GENERATION
        assert sync(c, "gerr1", gen + 5, member).error_code == ErrorCode.ILLEGAL_GENERATION
        assert join(c, "gerr1", "not-a-member").error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_heartbeat_during_rebalance(gbroker: BrokerProcess) -> None:
    with RawClient(gbroker.bootstrap) as a, RawClient(gbroker.bootstrap) as b:
        member, gen = stable_member(a, "gerr2")
        first = join(b, "gerr2")
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        # B's real join waits for A to rejoin: send it from another thread.
        b_joined: list[Any] = []
        t = threading.Thread(target=lambda: b_joined.append(join(b, "gerr2", first.member_id)), daemon=True)
        t.start()
        # Heartbeat until the coordinator reports the rebalance B's join started (a condition with a
        # generous deadline, not a number of tries).
        codes = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            codes.append(heartbeat(a, "gerr2", gen, member))
            if codes[-1] == ErrorCode.REBALANCE_IN_PROGRESS:
                break
            time.sleep(0.05)
        assert codes[-1] == ErrorCode.REBALANCE_IN_PROGRESS, codes
        r = join(a, "gerr2", member)  # A rejoins: the rebalance completes for both
        assert r.error_code == 0 and r.generation_id == gen + 1
        t.join(30)
        assert not t.is_alive(), "B's join was never answered"
        (rb,) = b_joined
        assert rb.error_code == 0 and rb.generation_id == gen + 1 and rb.member_id == first.member_id, rb


def test_protocols_with_nothing_in_common(gbroker: BrokerProcess) -> None:
    with RawClient(gbroker.bootstrap) as a, RawClient(gbroker.bootstrap) as b:
        stable_member(a, "gerr3")
        assert (
            join(b, "gerr3", protocols=[("roundrobin", b"")]).error_code
            == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        )
        assert join(b, "gerr3", protocol_type="connect").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_commit_for_an_unknown_topic(gbroker: BrokerProcess) -> None:
    create_topic(gbroker.bootstrap, "known", 1)
    OC = OffsetCommitRequest
    P = OC.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    with RawClient(gbroker.bootstrap) as c:
        c.request(FindCoordinatorRequest(key="gerr4", key_type=0), 2)
        r = c.request(
            OC(
                group_id="gerr4",
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=[
                    OC.OffsetCommitRequestTopic(
                        name=name,
                        partitions=[
                            P(
                                partition_index=p,
                                committed_offset=1,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            )
                        ],
                    )
                    for name, p in [("nope", 0), ("known", 0), ("known", 7)]
                ],
            ),
            7,
        )
        codes = [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions]
        assert codes == [
            ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ("known", 0, ErrorCode.NONE),
            ("known", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
