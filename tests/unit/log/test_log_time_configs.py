"""Topic configs of time that Kafka has and Brook honours: max.compaction.lag.ms (rolls the active
segment and forces a cleaning pass), segment.jitter.ms, message.timestamp.before/after.max.ms."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_batches import FakeClock, open_log
from test_log_cleaner import COMPACT, NOW, compact_log, fill, kbatch

from brook.config import TopicConfig
from brook.protocol.errors import ErrorCode, KafkaError


def test_max_compaction_lag_rolls_the_active_segment_of_a_compacted_topic(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    log = compact_log(tmp_path / "p", clock, max_compaction_lag_ms=1_000)
    fill(log, 3, keys=1)
    clock.now += 1_001
    fill(log, 1, keys=1)
    assert len(log._segments) == 2  # segment.ms is a week: the lag rolled it
    plain = open_log(tmp_path / "q", clock, max_compaction_lag_ms=1_000)  # not compacted: no effect
    plain.append(kbatch([(b"k", b"v")]))
    clock.now += 5_000
    plain.append(kbatch([(b"k", b"v")]))
    assert len(plain._segments) == 1
    assert (
        TopicConfig(cleanup_policy=COMPACT, segment_ms=500, max_compaction_lag_ms=900).max_segment_ms == 500
    )


def test_max_compaction_lag_makes_a_pass_due_below_the_dirty_ratio(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    log = compact_log(tmp_path / "p", clock, segment_bytes=200, min_cleanable_dirty_ratio=0.99)
    fill(log, 20, keys=2, ts=NOW - 50_000)
    log.compact(NOW)
    fill(log, 4, keys=2, ts=NOW)  # a little dirty data (after the old active segment's), ratio < 0.99
    assert 0 < log.dirty_ratio() < 0.99
    assert not log.compaction_due(NOW + 10_000)
    log.update_config(
        TopicConfig(
            cleanup_policy=COMPACT,
            segment_bytes=200,
            min_cleanable_dirty_ratio=0.99,
            max_compaction_lag_ms=65_000,
        )
    )
    # The oldest dirty batch (the segment that was active during the first pass) is from NOW - 50 s.
    assert not log.compaction_due(NOW + 10_000)
    assert log.compaction_due(NOW + 20_000)
    log.compact(NOW + 20_000)
    assert log.dirty_ratio() == 0.0 and not log.compaction_due(NOW + 20_000)


def test_segment_jitter_takes_a_random_head_start_off_segment_ms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("brook.log.partition_log.random.randrange", lambda bound: bound - 1)
    clock = FakeClock(NOW)
    log = open_log(tmp_path / "p", clock, segment_ms=10_000, segment_jitter_ms=4_000)
    log.append(kbatch([(b"k", b"v")]))
    clock.now += 6_002  # past 10,000 - 3,999
    log.append(kbatch([(b"k", b"v")]))
    assert len(log._segments) == 2
    none = open_log(tmp_path / "q", clock, segment_ms=10_000)
    none.append(kbatch([(b"k", b"v")]))
    clock.now += 9_000
    none.append(kbatch([(b"k", b"v")]))
    assert len(none._segments) == 1


@pytest.mark.parametrize(
    ("ts", "refused"),
    [(NOW, False), (NOW - 59_000, False), (NOW - 61_000, True), (NOW + 9_000, False), (NOW + 11_000, True)],
)
def test_create_time_bounds(tmp_path: Path, ts: int, refused: bool) -> None:
    log = open_log(
        tmp_path / "p",
        FakeClock(NOW),
        message_timestamp_before_max_ms=60_000,
        message_timestamp_after_max_ms=10_000,
    )
    batch = kbatch([(b"k", b"v")], ts=ts)
    if refused:
        with pytest.raises(KafkaError) as e:
            log.append(batch)
        assert e.value.code == ErrorCode.INVALID_TIMESTAMP and log.log_end_offset == 0
    else:
        assert log.append(batch).base_offset == 0


def test_create_time_bounds_do_not_apply_to_log_append_time_or_followers(tmp_path: Path) -> None:
    bounds = {"message_timestamp_before_max_ms": 1_000, "message_timestamp_after_max_ms": 1_000}
    stamped = open_log(tmp_path / "p", FakeClock(NOW), message_timestamp_type="LogAppendTime", **bounds)
    assert stamped.append(kbatch([(b"k", b"v")], ts=0)).base_offset == 0
    follower = open_log(tmp_path / "q", FakeClock(NOW), **bounds)
    assert follower.append(kbatch([(b"k", b"v")], ts=0), assign_offsets=False).base_offset == 0
