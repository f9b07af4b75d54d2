"""Scaling operations step by step (pure): grow then move on; move off then shrink."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from brook_operator.autoscaling import operation as ops
from brook_operator.autoscaling.planner import Assignment, Move, is_balanced


def rr(partitions: int, rf: int, brokers: int) -> tuple[Assignment, ...]:
    return tuple(Assignment("t", p, tuple((p + i) % brokers for i in range(rf))) for p in range(partitions))


def observed(
    spec: int,
    registered: Sequence[int],
    assignments: Sequence[Assignment],
    in_flight: Mapping[tuple[str, int], tuple[int, ...]] | None = None,
) -> ops.Observed:
    return ops.Observed(spec, tuple(registered), tuple(assignments), dict(in_flight or {}))


def complete(assignments: Sequence[Assignment], moves: Sequence[Move]) -> tuple[Assignment, ...]:
    by = {m.key: m.target for m in moves}
    return tuple(Assignment(a.topic, a.partition, by.get(a.key, a.replicas)) for a in assignments)


def test_scale_out_grows_waits_for_the_brokers_then_moves_a_few_at_a_time() -> None:
    s = ops.start(ops.SCALE_OUT, 3, 4, now=0.0)
    assert s.set_replicas == 4 and s.operation is not None
    op = s.operation
    assert (op.phase, op.source, op.target) == (ops.WAITING_FOR_BROKERS, 3, 4)

    parts = rr(12, 2, 3)
    s = ops.step(op, observed(4, [0, 1, 2], parts), now=5.0)
    assert s.message == "scale-out 3 → 4: waiting for brokers 3 to register" and not s.submit
    assert s.set_replicas is None  # spec.replicas is already 4

    s = ops.step(op, observed(3, [0, 1, 2], parts), now=6.0)  # the replicas patch was lost: again
    assert s.set_replicas == 4

    s = ops.step(op, observed(4, [0, 1, 2, 3], parts), now=10.0, max_in_flight=2)
    assert s.operation is not None and s.operation.phase == ops.MOVING_PARTITIONS
    assert len(s.submit) == 2 and s.operation.moves_started == 2
    assert s.message == "scale-out 3 → 4: 2 partition moves in progress, 4 more planned (2 started so far)"
    op = s.operation

    # while those two are in flight, no more than max_in_flight at once
    flying = {m.key: m.target for m in s.submit}
    s2 = ops.step(op, observed(4, [0, 1, 2, 3], parts, flying), now=12.0, max_in_flight=2)
    assert s2.submit == ()

    # moves complete; keep going until balanced
    for _ in range(10):
        parts = complete(parts, s.submit)
        s = ops.step(op, observed(4, [0, 1, 2, 3], parts), now=20.0, max_in_flight=2)
        if s.finished:
            break
        assert s.operation is not None
        op = s.operation
    assert s.finished and s.operation is None
    assert s.message == "scale-out 3 → 4 done: partitions balanced"
    assert is_balanced(parts, range(4))


def test_scale_in_moves_off_then_shrinks_then_waits_for_the_brokers_to_stop() -> None:
    s = ops.start(ops.SCALE_IN, 4, 3, now=0.0)
    assert s.set_replicas is None and s.operation is not None
    assert s.message == "scale-in 4 → 3: moving partitions off brokers 3"
    op = s.operation
    parts = rr(8, 2, 4)
    s = ops.step(op, observed(4, [0, 1, 2, 3], parts), now=1.0, max_in_flight=10)
    assert s.submit and all(3 not in m.target for m in s.submit)
    assert s.set_replicas is None  # not before broker 3 is empty
    assert s.operation is not None
    op = s.operation
    parts = complete(parts, s.submit)
    s = ops.step(op, observed(4, [0, 1, 2, 3], parts), now=2.0)
    assert s.operation is not None and s.operation.phase == ops.REMOVING_BROKERS
    assert s.set_replicas == 3
    op = s.operation
    s = ops.step(op, observed(3, [0, 1, 2, 3], parts), now=3.0)
    assert s.message == "scale-in 4 → 3: waiting for brokers 3 to stop" and not s.finished
    s = ops.step(op, observed(3, [0, 1, 2], parts), now=4.0)
    assert s.finished and s.message == "scale-in 4 → 3 done"


def test_a_partition_landing_on_a_departing_broker_sends_the_scale_in_back_to_moving() -> None:
    op = ops.Operation(ops.SCALE_IN, 3, 2, 0.0, ops.REMOVING_BROKERS)
    parts = (*rr(4, 2, 2), Assignment("new", 0, (2, 0)))
    s = ops.step(op, observed(2, [0, 1, 2], parts), now=1.0)
    assert s.operation is not None and s.operation.phase == ops.MOVING_PARTITIONS
    assert [m.key for m in s.submit] == [("new", 0)] and 2 not in s.submit[0].target


def test_scale_in_waits_while_a_remaining_broker_is_missing() -> None:
    op = ops.Operation(ops.SCALE_IN, 3, 2, 0.0, ops.MOVING_PARTITIONS)
    s = ops.step(op, observed(3, [0, 2], rr(4, 2, 3)), now=1.0)
    assert s.message == "scale-in 3 → 2: waiting for brokers 1 to register" and not s.submit


def test_an_operation_that_takes_too_long_is_given_up() -> None:
    op = ops.Operation(ops.SCALE_OUT, 2, 3, 0.0, ops.WAITING_FOR_BROKERS)
    s = ops.step(op, observed(3, [0, 1], rr(2, 1, 2)), now=100.0, timeout=60)
    assert s.operation is None and not s.finished
    assert s.aborted == "scale-out 2 → 3 did not finish within 60s (phase WaitingForBrokers)"


def test_unplaceable_partitions_abort_the_operation() -> None:
    op = ops.Operation(ops.SCALE_IN, 3, 2, 0.0, ops.MOVING_PARTITIONS)
    s = ops.step(op, observed(3, [0, 1, 2], [Assignment("t", 0, (0, 1, 2))]), now=1.0)
    assert s.operation is None and s.aborted == "partitions t-0 have a replication factor above 2"


def test_moves_in_flight_count_as_their_targets() -> None:
    op = ops.Operation(ops.SCALE_IN, 3, 2, 0.0, ops.MOVING_PARTITIONS)
    parts = (Assignment("t", 0, (2, 0)), Assignment("t", 1, (1, 0)))
    # t-0 is already moving to (1, 0): nothing else to do but wait for it
    s = ops.step(op, observed(3, [0, 1, 2], parts, {("t", 0): (1, 0)}), now=1.0)
    assert s.submit == () and s.operation is not None and s.operation.phase == ops.MOVING_PARTITIONS
