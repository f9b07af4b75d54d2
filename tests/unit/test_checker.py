"""The fault tests' checker (tests/support/checker.py) finds each kind of anomaly it claims to."""

from __future__ import annotations

from tests.support.checker import Workload


def workload() -> Workload:
    w = Workload("127.0.0.1:1", "t", "tx", "g")  # never started: its records are set by hand
    w.acked = {b"i-00000001", b"i-00000002", b"i-00000003"}
    w.committed = {b"t-1-0"}
    w.aborted = {b"t-2-0"}
    w.seen = w.acked | w.committed
    return w


GOOD = [(0, 0, b"i-00000001"), (0, 0, b"i-00000002"), (0, 1, b"i-00000003"), (1, 0, b"t-1-0")]


def test_a_clean_history_passes() -> None:
    assert workload().check(GOOD).ok


def test_each_anomaly_is_found() -> None:
    w = workload()
    assert w.check(GOOD[1:]).lost == [b"i-00000001"]
    assert w.check([*GOOD, GOOD[0]]).duplicated == [b"i-00000001"]
    assert w.check([GOOD[1], GOOD[0], *GOOD[2:]]).reordered == [(0, b"i-00000001")]
    assert w.check([*GOOD, (1, 0, b"t-2-0")]).aborted_read == [b"t-2-0"]
    w.seen.discard(b"t-1-0")
    assert w.check(GOOD).unconsumed == [b"t-1-0"]
    w.offsets_back.append(("t", 0, 10, 4))
    assert not w.check(GOOD).ok


def test_an_uncertain_transaction_may_be_in_or_out() -> None:
    w = workload()
    w.uncertain = {b"t-2-0"}
    assert w.check([*GOOD, (1, 0, b"t-2-0")]).ok
