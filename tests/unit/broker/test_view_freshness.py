"""The proof that a broker's view is current (brook.broker.view_freshness), on a clock of our own."""

from __future__ import annotations

from brook.broker.view_freshness import ViewFreshness


def test_a_mark_back_through_the_watch_proves_the_view_from_its_sending_time() -> None:
    v = ViewFreshness(valid_s=3.0, stall_s=5.0)
    v.caught_up(100, sent_at=10.0)  # the snapshot read at start
    assert v.valid_until() == 13.0
    v.written(105, sent_at=11.0)
    v.written(107, sent_at=12.0)
    assert v.valid_until() == 13.0  # written is not proven
    v.seen(106)  # the watch delivered something past the first mark only
    assert v.valid_until() == 14.0
    v.seen(107)
    assert v.valid_until() == 15.0


def test_the_watch_is_stalled_only_when_marks_written_since_did_not_come_back_either() -> None:
    v = ViewFreshness(valid_s=3.0, stall_s=5.0, stall_marks=3)
    v.written(1, sent_at=0.0)
    assert not v.stalled(now=100.0)  # one old mark: the loop itself may have been stuck
    for i in range(2, 5):
        v.written(i, sent_at=float(i))
    assert v.stalled(now=6.0)
    assert not v.stalled(now=4.0)
    v.caught_up(10, sent_at=7.0)  # a fresh snapshot covers them all
    assert not v.stalled(now=100.0)
    assert v.valid_until() == 10.0
