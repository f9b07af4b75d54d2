"""The fetch-session cache (KIP-227): creation, epochs, forgetting, closing, LRU eviction."""

from __future__ import annotations

import pytest

from brook.broker.fetch_sessions import FetchSessionCache
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.fetch import (
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchTopic,
    FetchTopicResult,
    ForgottenTopic,
)


def req(
    sid: int, epoch: int, parts: dict[int, int], forgotten: list[int] | None = None, replica_id: int = -1
) -> FetchRequest:
    fps = [FetchPartition(p, -1, o, -1, -1, 1 << 20) for p, o in parts.items()]
    gone = [ForgottenTopic("t", None, forgotten)] if forgotten else []
    return FetchRequest(
        replica_id, -1, 0, 0, 1 << 20, 0, sid, epoch, [FetchTopic("t", None, fps)] if fps else [], gone, ""
    )


def result(hw: dict[int, int], data: set[int] = frozenset()) -> list[FetchTopicResult]:
    return [
        FetchTopicResult(
            "t",
            bytes(16),
            [FetchPartitionResult(p, 0, h, h, 0, b"x" if p in data else None) for p, h in hw.items()],
        )
    ]


def test_session_lifecycle() -> None:
    cache = FetchSessionCache()
    assert cache.begin(req(0, -1, {0: 0}), 12) is None  # sessionless
    s = cache.begin(req(0, 0, {0: 0, 1: 0}), 12)
    assert s is not None and len(cache) == 1
    assert [p.partition for p in s.answer(result({0: 5, 1: 0}, {0}), True)[0].partitions] == [0, 1]
    r = req(s.session_id, 1, {0: 5})
    assert cache.begin(r, 12) is s
    assert sorted(p.partition for t in r.topics for p in t.partitions) == [0, 1]  # the whole session
    assert s.answer(result({0: 5, 1: 0}), False) == []  # nothing changed
    assert [p.partition for p in s.answer(result({0: 5, 1: 3}), False)[0].partitions] == [1]
    with pytest.raises(KafkaError) as e:
        cache.begin(req(s.session_id, 5, {}), 12)
    assert e.value.code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    r = req(s.session_id, 2, {}, forgotten=[1])
    cache.begin(r, 12)
    assert [p.partition for t in r.topics for p in t.partitions] == [0]
    assert cache.begin(req(s.session_id, -1, {0: 0}), 12) is None and len(cache) == 0
    with pytest.raises(KafkaError) as e:
        cache.begin(req(s.session_id, 3, {}), 12)
    assert e.value.code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_the_least_recently_used_session_goes_when_full() -> None:
    cache = FetchSessionCache(slots=2)
    a = cache.begin(req(0, 0, {0: 0}), 12)
    b = cache.begin(req(0, 0, {0: 0}), 12)
    assert a is not None and b is not None
    cache.begin(req(a.session_id, 1, {}), 12)  # a used since: b is the oldest
    c = cache.begin(req(0, 0, {0: 0}), 12)
    assert c is not None and len(cache) == 2
    with pytest.raises(KafkaError):
        cache.begin(req(b.session_id, 1, {}), 12)
    assert cache.begin(req(a.session_id, 2, {}), 12) is a


def test_followers_sessions_are_not_evicted_for_consumers() -> None:
    cache = FetchSessionCache(slots=2)
    follower = cache.begin(req(0, 0, {0: 0}, replica_id=1), 12)
    consumer = cache.begin(req(0, 0, {0: 0}), 12)
    assert follower is not None and consumer is not None
    newer = cache.begin(req(0, 0, {0: 0}), 12)  # the follower's is the oldest, the consumer's goes
    assert newer is not None
    assert cache.begin(req(follower.session_id, 1, {}, replica_id=1), 12) is follower
    with pytest.raises(KafkaError):
        cache.begin(req(consumer.session_id, 1, {}), 12)
    second = cache.begin(req(0, 0, {0: 0}, replica_id=2), 12)  # a follower may take a consumer's slot
    assert second is not None and len(cache) == 2
    assert cache.begin(req(0, 0, {0: 0}), 12) is None  # all slots followers': no session, full fetches
    assert cache.begin(req(follower.session_id, 2, {}, replica_id=1), 12) is follower
