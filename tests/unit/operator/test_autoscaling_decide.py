"""The autoscaler's decision (pure): HPA arithmetic, tolerance, stabilization windows, cooldown, bounds."""

from __future__ import annotations

import itertools
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from brook_operator.autoscaling import decide as d
from brook_operator.autoscaling.decide import Observation, Policy, Recommendation, decide, record
from brook_operator.spec import parse_cluster

KIB = 1024
POLICY = Policy(
    min_replicas=1,
    max_replicas=10,
    bytes_in_per_broker=25 * KIB,
    scale_up_window=0,
    scale_down_window=0,
    cooldown=0,
)


def bytes_in(total: float, brokers: int) -> dict[int, float]:
    return {b: total / brokers for b in range(brokers)}


def obs(current: int, total: float, rf: int = 1, partitions: float | None = None) -> Observation:
    return Observation(
        current,
        rf,
        bytes_in(total, current),
        None if partitions is None else {b: partitions / current for b in range(current)},
    )


def test_policy_from_the_spec() -> None:
    spec = parse_cluster(
        "c",
        {
            "replicas": 1,
            "autoscaling": {
                "enabled": True,
                "minReplicas": 2,
                "maxReplicas": 6,
                "prometheusUrl": "http://prometheus:9090",
                "targets": {"bytesInPerBroker": 1000, "partitionsPerBroker": 50},
                "scaleUp": {"stabilizationWindowSeconds": 30},
                "scaleDown": {"stabilizationWindowSeconds": 120},
                "cooldownSeconds": 60,
            },
        },
    )
    p = Policy.from_spec(spec.autoscaling)
    assert p == Policy(2, 6, 1000, 50, 30.0, 120.0, 60.0)
    assert p.targets == {d.BYTES_IN: 1000, d.PARTITIONS: 50}
    assert p.history_window == 120.0


def test_hpa_arithmetic_with_the_numbers() -> None:
    # 61 KiB/s over 2 brokers = 30.5 KiB/s per broker, target 25 KiB/s: ratio 1.22 → ceil(2 * 1.22) = 3
    dec = decide(POLICY, obs(2, 61 * KIB), (), None, now=100.0)
    assert (dec.action, dec.reason, dec.current, dec.desired) == (d.SCALE_UP, d.METRIC_ABOVE_TARGET, 2, 3)
    (m,) = dec.metrics
    assert (m.name, m.total, m.per_broker, m.target, m.replicas) == (
        d.BYTES_IN,
        61 * KIB,
        30.5 * KIB,
        25 * KIB,
        3,
    )
    assert round(m.ratio, 2) == 1.22
    assert dec.message == (
        "bytes in 61.0 KiB/s over 2 brokers = 30.5 KiB/s per broker, target 25.0 KiB/s (ratio 1.22) → 3; "
        "recommended 3, stabilized 3, bounds [1, 10]: 2 → 3 brokers"
    )
    assert dec.history == (Recommendation(100.0, 3),)


def test_within_the_tolerance_nothing_changes() -> None:
    dec = decide(POLICY, obs(4, 4 * 26 * KIB), (), None, now=1.0)  # ratio 1.04
    assert (dec.action, dec.reason, dec.desired, dec.recommended) == (d.NONE, d.NO_CHANGE, 4, 4)
    dec = decide(POLICY, obs(4, 4 * 28 * KIB), (), None, now=1.0)  # ratio 1.12: outside
    assert (dec.action, dec.desired) == (d.SCALE_UP, 5)


def test_exact_multiples_do_not_round_up() -> None:
    dec = decide(POLICY, obs(2, 75 * KIB), (), None, now=1.0)  # 3.0 brokers' worth
    assert dec.desired == 3


def test_the_largest_target_wins() -> None:
    p = replace(POLICY, partitions_per_broker=10)
    # bytes ask for 1 broker, partitions (60 replicas / 10) for 6
    dec = decide(p, obs(3, 1 * KIB, partitions=60), (), None, now=1.0)
    assert [m.replicas for m in dec.metrics] == [1, 6]
    assert (dec.action, dec.desired) == (d.SCALE_UP, 6)
    assert "partition replicas 60 over 3 brokers = 20.0 per broker, target 10 (ratio 2.00) → 6" in dec.message


def test_scale_down_below_target() -> None:
    dec = decide(POLICY, obs(6, 30 * KIB), (), None, now=1.0)
    assert (dec.action, dec.reason, dec.desired) == (d.SCALE_DOWN, d.METRIC_BELOW_TARGET, 2)


def test_scale_up_window_follows_the_smallest_recent_recommendation() -> None:
    p = replace(POLICY, scale_up_window=60)
    hist: tuple[Recommendation, ...] = ()
    # A spike: 5 brokers' worth once, then 3 brokers' worth: within the window the minimum is 3.
    dec = decide(p, obs(2, 125 * KIB), hist, None, now=0.0)
    assert (dec.action, dec.reason, dec.desired) == (d.SCALE_UP, d.METRIC_ABOVE_TARGET, 5)
    # ... only if it was the first; with a lower recent recommendation the spike is cut.
    hist = (Recommendation(-10.0, 2),)
    dec = decide(p, obs(2, 125 * KIB), hist, None, now=0.0)
    assert (dec.action, dec.reason, dec.desired, dec.stabilized) == (d.NONE, d.STABILIZING, 2, 2)
    hist = dec.history
    dec = decide(p, obs(2, 75 * KIB), hist, None, now=30.0)
    assert (dec.action, dec.desired) == (d.NONE, 2)  # the 2 at -10 is still in the window
    dec = decide(p, obs(2, 75 * KIB), dec.history, None, now=51.0)  # -10 left the window; min(5, 3) = 3
    assert (dec.action, dec.desired, dec.stabilized) == (d.SCALE_UP, 3, 3)


def test_scale_down_window_follows_the_largest_recent_recommendation() -> None:
    p = replace(POLICY, scale_down_window=100)
    dec = decide(p, obs(4, 100 * KIB), (), None, now=0.0)  # 4 brokers' worth
    assert dec.action == d.NONE
    dec = decide(p, obs(4, 25 * KIB), dec.history, None, now=50.0)  # load drops: 1 broker's worth
    assert (dec.action, dec.reason, dec.desired, dec.recommended) == (d.NONE, d.STABILIZING, 4, 1)
    dec = decide(p, obs(4, 50 * KIB), dec.history, None, now=99.0)
    assert dec.desired == 4
    dec = decide(p, obs(4, 50 * KIB), dec.history, None, now=101.0)  # the 4 at t=0 left the window
    assert (dec.action, dec.desired) == (d.SCALE_DOWN, 2)  # max(1, 2) over the window


def test_cooldown_holds_any_action() -> None:
    p = replace(POLICY, cooldown=300)
    dec = decide(p, obs(2, 100 * KIB), (), last_scale_time=1000.0, now=1100.0)
    assert (dec.action, dec.reason, dec.desired, dec.stabilized) == (d.NONE, d.COOLING_DOWN, 2, 4)
    assert dec.message.endswith("cooling down for 200s more (cooldownSeconds 300)")
    assert dec.history == (Recommendation(1100.0, 4),)  # still recorded
    dec = decide(p, obs(2, 100 * KIB), dec.history, last_scale_time=1000.0, now=1300.0)
    assert (dec.action, dec.desired) == (d.SCALE_UP, 4)


def test_bounds_and_the_replication_factor_floor() -> None:
    p = replace(POLICY, min_replicas=2, max_replicas=5)
    dec = decide(p, obs(5, 500 * KIB), (), None, now=1.0)
    assert (dec.action, dec.reason, dec.desired, dec.limited) == (d.NONE, d.LIMITED, 5, d.TOO_MANY_REPLICAS)
    dec = decide(p, obs(3, 500 * KIB), (), None, now=1.0)
    assert (dec.action, dec.desired, dec.limited) == (d.SCALE_UP, 5, d.TOO_MANY_REPLICAS)
    dec = decide(p, obs(3, 0), (), None, now=1.0)
    assert (dec.action, dec.desired, dec.limited) == (d.SCALE_DOWN, 2, d.TOO_FEW_REPLICAS)
    # never fewer brokers than the largest replication factor, whatever minReplicas says
    dec = decide(p, obs(3, 0, rf=3), (), None, now=1.0)
    assert (dec.action, dec.desired, dec.lower, dec.limited) == (d.NONE, 3, 3, d.REPLICATION_FACTOR_FLOOR)
    dec = decide(p, obs(2, 0, rf=3), (), None, now=1.0)
    assert (dec.action, dec.reason, dec.desired) == (d.SCALE_UP, d.BELOW_MINIMUM, 3)
    dec = decide(p, obs(7, 7 * 25 * KIB), (), None, now=1.0)
    assert (dec.action, dec.reason, dec.desired) == (d.SCALE_DOWN, d.ABOVE_MAXIMUM, 5)


def test_contradictory_bounds_are_an_invalid_config_and_keep_the_size() -> None:
    dec = decide(replace(POLICY, min_replicas=5, max_replicas=3), obs(4, 500 * KIB), (), None, now=1.0)
    assert (dec.action, dec.reason, dec.desired, dec.valid) == (d.NONE, d.INVALID_CONFIG, 4, False)
    assert dec.message == "minReplicas 5 exceeds maxReplicas 3"
    dec = decide(replace(POLICY, max_replicas=2), obs(2, 500 * KIB, rf=3), (), None, now=1.0)
    assert (dec.reason, dec.desired) == (d.INVALID_CONFIG, 2)
    assert dec.message.startswith("maxReplicas 2 is below the largest replication factor 3")
    dec = decide(replace(POLICY, bytes_in_per_broker=None), obs(2, 0), (), None, now=1.0)
    assert dec.reason == d.INVALID_CONFIG and "no target" in dec.message


def test_history_keeps_runs_once_and_drops_old_entries() -> None:
    h: tuple[Recommendation, ...] = ()
    for t, n in [(0, 3), (10, 3), (20, 3), (30, 4), (40, 4), (50, 3)]:
        h = record(h, Recommendation(float(t), n), keep=100)
    assert h == (Recommendation(20.0, 3), Recommendation(40.0, 4), Recommendation(50.0, 3))
    h = record(h, Recommendation(125.0, 5), keep=100)
    assert h == (Recommendation(40.0, 4), Recommendation(50.0, 3), Recommendation(125.0, 5))


# -- properties ---------------------------------------------------------------------------------------

policies = st.builds(
    Policy,
    min_replicas=st.integers(1, 6),
    max_replicas=st.integers(1, 12),
    bytes_in_per_broker=st.integers(1, 1000),
    partitions_per_broker=st.one_of(st.none(), st.integers(1, 100)),
    scale_up_window=st.sampled_from([0.0, 15.0, 60.0]),
    scale_down_window=st.sampled_from([0.0, 30.0, 120.0]),
    cooldown=st.sampled_from([0.0, 20.0, 90.0]),
).filter(lambda p: p.min_replicas <= p.max_replicas)


@settings(max_examples=300, deadline=None)
@given(
    p=policies,
    current=st.integers(1, 20),
    rf=st.integers(0, 6),
    load=st.floats(0, 50_000),
    parts=st.floats(0, 2000),
    history=st.lists(st.tuples(st.floats(0, 200), st.integers(0, 30)), max_size=8),
)
def test_actions_never_leave_the_bounds_nor_go_below_the_replication_factor(
    p: Policy, current: int, rf: int, load: float, parts: float, history: list[tuple[float, int]]
) -> None:
    hist = tuple(Recommendation(t, n) for t, n in sorted(history))
    o = obs(current, load, rf=rf, partitions=parts)
    dec = decide(p, o, hist, None, now=200.0)
    if rf > p.max_replicas:
        assert dec.reason == d.INVALID_CONFIG and dec.desired == current
        return
    assert dec.lower == max(p.min_replicas, rf)
    if dec.action != d.NONE:
        assert max(p.min_replicas, rf) <= dec.desired <= p.max_replicas
        assert dec.desired >= rf
    else:
        assert dec.desired == current
    if max(p.min_replicas, rf) <= current <= p.max_replicas:  # from inside the bounds: stays inside
        assert max(p.min_replicas, rf) <= dec.desired <= p.max_replicas


@settings(max_examples=300, deadline=None)
@given(
    p=policies,
    rf=st.integers(0, 3),
    steps=st.lists(
        st.tuples(st.floats(1, 40), st.floats(0, 10_000), st.floats(0, 500)), min_size=1, max_size=60
    ),
)
def test_no_flapping_within_the_windows_and_the_cooldown(
    p: Policy, rf: int, steps: list[tuple[float, float, float]]
) -> None:
    """Simulated passes with the action applied at once: consecutive actions are a cooldown apart, and a
    scale-up is not reversed within the scale-down window (nor a scale-down within the scale-up one)."""
    if rf > p.max_replicas:
        return
    lo = max(p.min_replicas, rf)
    current = lo
    hist: tuple[Recommendation, ...] = ()
    last: float | None = None
    actions: list[tuple[float, str, int]] = []
    now = 0.0
    for dt, load, parts in steps:
        now += dt
        dec = decide(p, obs(current, load, rf=rf, partitions=parts), hist, last, now)
        hist = dec.history
        assert lo <= dec.desired <= p.max_replicas
        if dec.action != d.NONE:
            actions.append((now, dec.action, dec.desired))
            current, last = dec.desired, now
    for (t1, a1, _), (t2, a2, _) in itertools.pairwise(actions):
        assert t2 - t1 >= p.cooldown
        if a1 == d.SCALE_UP and a2 == d.SCALE_DOWN:
            assert t2 - t1 >= p.scale_down_window, actions
        if a1 == d.SCALE_DOWN and a2 == d.SCALE_UP:
            assert t2 - t1 >= p.scale_up_window, actions
