"""The steps of one scaling operation (pure), advanced once per autoscaler pass.

Scale-out: set spec.replicas to the new count (the Cluster reconcile grows the StatefulSet) → wait until
every new broker is registered in the cluster's Metadata → move partitions onto them, a few
reassignments at a time (the brokers throttle the copying), until replica counts are balanced.
Scale-in: move every replica off the departing (highest) ordinals, balancing the rest → once they hold
nothing, set spec.replicas to the new count (the scale-down guard in the Cluster reconcile agrees, as
nothing is left on them) → wait until they are gone from the Metadata. A partition that lands on a
departing broker meanwhile (a new topic) sends the operation back to moving partitions.

The operation is part of the autoscaling status, so a restarted operator (or a new leader) continues it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from .planner import Assignment, Move, PartitionKey, plan

SCALE_OUT = "ScaleOut"
SCALE_IN = "ScaleIn"

WAITING_FOR_BROKERS = "WaitingForBrokers"  # scale-out: the new brokers have not all registered yet
MOVING_PARTITIONS = "MovingPartitions"  # reassignments in progress
REMOVING_BROKERS = "RemovingBrokers"  # scale-in: spec.replicas lowered, departing brokers stopping

DEFAULT_MAX_IN_FLIGHT = 5
DEFAULT_TIMEOUT = 3600.0


@dataclass(frozen=True, slots=True)
class Operation:
    kind: str  # SCALE_OUT | SCALE_IN
    source: int  # broker count before
    target: int  # broker count after
    started: float
    phase: str
    moves_started: int = 0  # reassignments submitted so far

    @property
    def brokers(self) -> range:
        """The brokers that hold the partitions once the operation is done (ordinals 0..target-1)."""
        return range(self.target)


@dataclass(frozen=True, slots=True)
class Observed:
    spec_replicas: int
    registered: tuple[int, ...]  # broker ids in the cluster's Metadata
    assignments: tuple[Assignment, ...]  # every partition's replicas (Metadata)
    in_flight: Mapping[PartitionKey, tuple[int, ...]]  # moves in progress → their target replicas


@dataclass(frozen=True, slots=True)
class Step:
    operation: Operation | None  # None: finished or aborted
    message: str  # what is happening (for the AutoscalingProgressing condition)
    submit: tuple[Move, ...] = ()  # reassignments to start now
    set_replicas: int | None = None  # patch spec.replicas to this
    finished: bool = False
    aborted: str | None = None  # why the operation was given up


def start(kind: str, source: int, target: int, now: float) -> Step:
    """A new operation; a scale-out raises spec.replicas at once."""
    if kind == SCALE_OUT:
        op = Operation(SCALE_OUT, source, target, now, WAITING_FOR_BROKERS)
        return Step(op, f"scale-out {source} → {target}: adding brokers", set_replicas=target)
    op = Operation(SCALE_IN, source, target, now, MOVING_PARTITIONS)
    return Step(
        op, f"scale-in {source} → {target}: moving partitions off brokers {_ids(range(target, source))}"
    )


def effective(obs: Observed) -> tuple[list[Assignment], set[PartitionKey]]:
    """Assignments as they will be once the moves in progress complete, and those partitions."""
    out = []
    for a in obs.assignments:
        target = obs.in_flight.get(a.key)
        out.append(a if target is None else Assignment(a.topic, a.partition, tuple(target)))
    return out, set(obs.in_flight) & {a.key for a in obs.assignments}


def step(
    op: Operation,
    obs: Observed,
    now: float,
    *,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    timeout: float = DEFAULT_TIMEOUT,
) -> Step:
    label = f"{'scale-out' if op.kind == SCALE_OUT else 'scale-in'} {op.source} → {op.target}"
    if now - op.started > timeout:
        return Step(
            None,
            f"{label} given up after {now - op.started:.0f}s in phase {op.phase}",
            aborted=f"{label} did not finish within {timeout:.0f}s (phase {op.phase})",
        )
    registered = set(obs.registered)
    missing = [b for b in op.brokers if b not in registered]
    fix = op.target if op.kind == SCALE_OUT and obs.spec_replicas != op.target else None

    if op.phase == WAITING_FOR_BROKERS:
        if missing:
            return Step(op, f"{label}: waiting for brokers {_ids(missing)} to register", set_replicas=fix)
        op = replace(op, phase=MOVING_PARTITIONS)

    if op.phase == REMOVING_BROKERS:
        assignments, _ = effective(obs)
        held = _held_by(assignments, op.brokers)
        if not held:
            if obs.spec_replicas != op.target:
                return Step(op, f"{label}: lowering spec.replicas", set_replicas=op.target)
            leaving = sorted(b for b in registered if b >= op.target)
            if leaving:
                return Step(op, f"{label}: waiting for brokers {_ids(leaving)} to stop")
            return Step(None, f"{label} done", finished=True)
        op = replace(op, phase=MOVING_PARTITIONS)  # something landed on a departing broker

    # MOVING_PARTITIONS
    if missing:
        return Step(op, f"{label}: waiting for brokers {_ids(missing)} to register", set_replicas=fix)
    assignments, pinned = effective(obs)
    p = plan(assignments, op.brokers, fixed=pinned)
    if p.unplaceable:
        keys = ", ".join(f"{t}-{i}" for t, i in p.unplaceable[:3])
        return Step(
            None,
            f"{label} given up: partitions {keys} have more replicas than {op.target} brokers",
            aborted=f"partitions {keys} have a replication factor above {op.target}",
        )
    capacity = max(0, max_in_flight - len(obs.in_flight))
    submit = p.moves[:capacity]
    if not p.moves and not obs.in_flight:
        if op.kind == SCALE_OUT:
            return Step(None, f"{label} done: partitions balanced", set_replicas=fix, finished=True)
        op = replace(op, phase=REMOVING_BROKERS)
        return Step(
            op, f"{label}: brokers {_ids(range(op.target, op.source))} are empty", set_replicas=op.target
        )
    op = replace(op, moves_started=op.moves_started + len(submit))
    return Step(
        op,
        f"{label}: {len(obs.in_flight) + len(submit)} partition moves in progress, "
        f"{len(p.moves) - len(submit)} more planned ({op.moves_started} started so far)",
        submit=tuple(submit),
        set_replicas=fix,
    )


def _held_by(assignments: Sequence[Assignment], keep: range) -> list[int]:
    return sorted({b for a in assignments for b in a.replicas if b not in keep})


def _ids(ids: Sequence[int] | range) -> str:
    return ", ".join(str(i) for i in ids)
