"""One autoscaler pass over a Cluster: observe (Kafka, Prometheus), decide, act, report.

The pass never writes Kubernetes objects itself: it returns the new `status.autoscaling`, the
spec.replicas to set (the Cluster reconcile then grows or shrinks the StatefulSet) and the Events to
post; the kopf timer (handlers/autoscaling.py) applies them. Kafka (metadata, reassignments) and
Prometheus are reached through the protocols below, so tests run the pass against fakes or real ones.

Order of a pass: the spec (invalid or disabled: report and stop; the size is kept) → the cluster's
Metadata and moves in progress (unavailable: report, keep the size) → the metrics (a failure stops new
decisions but a running operation still advances, it needs none) → the decision (recorded in the
stabilization history even while an operation runs or the cooldown holds) → the operation: advance it,
or start one when the decision says so.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..facts import AdminError, ClusterSnapshot, Reassignment
from ..prometheus import DEFAULT_RATE_WINDOW, DEFAULT_SELECTOR, BrokerLoad, PrometheusError
from ..spec import ClusterSpec, SpecError, parse_cluster
from . import operation as ops
from . import report
from .decide import INVALID_CONFIG, NONE, SCALE_UP, Decision, Observation, Policy, decide
from .planner import Assignment, Move, PartitionKey
from .report import Event, Progress, Report, State

log = logging.getLogger(__name__)


class AutoscaleAdmin(Protocol):
    async def snapshot(self) -> ClusterSnapshot: ...

    async def list_reassignments(self) -> dict[PartitionKey, Reassignment]: ...

    async def alter_reassignments(
        self, targets: Mapping[PartitionKey, Sequence[int] | None]
    ) -> dict[PartitionKey, str | None]: ...


class LoadSource(Protocol):
    async def __call__(
        self, url: str, selector: str, *, bytes_in: bool, partitions: bool, window: str
    ) -> BrokerLoad: ...


@dataclass(frozen=True, slots=True)
class AutoscaleSettings:
    selector: str = DEFAULT_SELECTOR  # {name} {namespace}: which series are the cluster's brokers
    rate_window: str = DEFAULT_RATE_WINDOW  # the rate() window of bytes in
    max_in_flight: int = ops.DEFAULT_MAX_IN_FLIGHT  # concurrent partition moves
    operation_timeout: float = ops.DEFAULT_TIMEOUT


@dataclass(frozen=True, slots=True)
class PassResult:
    status: dict[str, Any] | None  # the new status.autoscaling (None: leave it alone)
    replicas: int | None  # set spec.replicas to this
    events: tuple[Event, ...]
    state: State  # carry to the next pass


def _effective(snapshot: ClusterSnapshot, moving: Mapping[PartitionKey, Reassignment]) -> list[Assignment]:
    out = []
    for p in snapshot.partitions:
        r = moving.get((p.topic, p.partition))
        out.append(Assignment(p.topic, p.partition, r.target if r is not None else p.replicas))
    return out


async def autoscale(
    body: Mapping[str, Any],
    *,
    state: State | None,
    load: LoadSource,
    settings: AutoscaleSettings,
    admin_of: Callable[[ClusterSpec], Awaitable[AutoscaleAdmin]],
    now: float,
) -> PassResult:
    """One pass. `admin_of(spec)` → the cluster's AutoscaleAdmin (admin_access.cluster_admin)."""
    meta = body.get("metadata") or {}
    name, namespace = str(meta["name"]), str(meta["namespace"])
    generation = meta.get("generation")
    prev: Mapping[str, Any] = (body.get("status") or {}).get("autoscaling") or {}
    st = state if state is not None else report.state_from_status(prev)
    events: list[Event] = []

    def finish(r: Report, s: State, replicas: int | None = None, op_message: str | None = None) -> PassResult:
        problem = None if r.active_reason == report.VALID_METRICS else r.active_reason
        if problem is not None and problem != s.last_problem and problem != report.DISABLED:
            events.append(Event("Warning", problem, r.active_message))
        s = replace(s, last_problem=problem)
        out = report.render(r, s, prev, now=now, generation=generation, operation_message=op_message)
        return PassResult(out, replicas, tuple(events), s)

    raw_spec = body.get("spec") or {}
    try:
        spec = parse_cluster(name, raw_spec)
    except SpecError as e:
        mine = [x for x in e.errors if x.startswith("spec.autoscaling")]
        raw_auto = raw_spec.get("autoscaling") if isinstance(raw_spec, Mapping) else None
        if not mine and not (isinstance(raw_auto, Mapping) and raw_auto.get("enabled") is True):
            return PassResult(None, None, (), st)
        reason = report.INVALID_CONFIG if mine else report.INVALID_SPEC
        message = "; ".join(mine) if mine else "the Cluster spec is invalid: " + "; ".join(e.errors)
        return finish(Report(reason, message + "; the cluster keeps its size"), st)

    a = spec.autoscaling
    if not a.enabled:
        if not prev:
            return PassResult(None, None, (), st)
        msg = "spec.autoscaling.enabled is false"
        if st.operation is not None:
            msg += f"; the {st.operation.kind} {st.operation.source} → {st.operation.target} was abandoned"
        s = replace(st, operation=None)
        return finish(Report(report.DISABLED, msg, progress=Progress(False, report.IDLE, msg)), s)

    policy = Policy.from_spec(a)
    admin = await admin_of(spec)
    try:
        snapshot = await admin.snapshot()
        moving = await admin.list_reassignments()
    except AdminError as e:
        progress = _idle_progress(st, prev)
        return finish(
            Report(report.KAFKA_UNAVAILABLE, f"{e}; the cluster keeps its size", progress=progress), st
        )
    assignments = _effective(snapshot, moving)
    largest_rf = max((len(x.replicas) for x in assignments), default=0)

    # Metrics and the decision.
    decision: Decision | None = None
    active_reason, active_message = report.VALID_METRICS, ""
    assert a.prometheus_url is not None  # parse_cluster requires it when enabled
    try:
        loaded = await load(
            a.prometheus_url,
            settings.selector.format(name=name, namespace=namespace),
            bytes_in=policy.bytes_in_per_broker is not None,
            partitions=policy.partitions_per_broker is not None,
            window=settings.rate_window,
        )
    except PrometheusError as e:
        active_reason, active_message = e.reason, f"{e.message}; the cluster keeps its size"
    else:
        obs = Observation(spec.replicas, largest_rf, loaded.bytes_in, loaded.partitions)
        decision = decide(policy, obs, st.history, st.last_scale_time, now)
        if decision.reason == INVALID_CONFIG:
            active_reason, active_message = (
                report.INVALID_CONFIG,
                decision.message + "; the cluster keeps its size",
            )
        else:
            active_message = f"metrics of brokers {_ids(loaded.brokers)} from {a.prometheus_url}"
            st = replace(st, history=decision.history)
            key = (decision.action, decision.reason, decision.desired)
            if key != st.last_decision_key:
                if decision.action == NONE:
                    events.append(
                        Event("Normal", report.EVENT_HOLD, f"{decision.reason}: {decision.message}")
                    )
                elif st.operation is not None:
                    events.append(
                        Event(
                            "Normal",
                            report.EVENT_HOLD,
                            f"{decision.reason}: {decision.message}; waits for the running "
                            f"{st.operation.kind} {st.operation.source} → {st.operation.target}",
                        )
                    )
                st = replace(st, last_decision_key=key)

    # The operation: advance the running one, or start one.
    observed = ops.Observed(
        spec.replicas,
        snapshot.broker_ids,
        tuple(Assignment(p.topic, p.partition, p.replicas) for p in snapshot.partitions),
        {k: r.target for k, r in moving.items()},
    )
    replicas: int | None = None
    step: ops.Step | None = None
    if st.operation is not None:
        step = await _step(st.operation, observed, now, settings)
    elif decision is not None and decision.valid and decision.action != NONE:
        kind = ops.SCALE_OUT if decision.action == SCALE_UP else ops.SCALE_IN
        started = ops.start(kind, decision.current, decision.desired, now)
        events.append(
            Event(
                "Normal",
                report.EVENT_SCALE_UP if kind == ops.SCALE_OUT else report.EVENT_SCALE_DOWN,
                f"{decision.reason}: {decision.message}",
            )
        )
        assert started.operation is not None
        replicas = started.set_replicas
        spec_now = replicas if replicas is not None else observed.spec_replicas
        step = await _step(started.operation, replace(observed, spec_replicas=spec_now), now, settings)

    progress = _idle_progress(st, prev)
    op_message: str | None = None
    if step is not None:
        if step.set_replicas is not None:
            replicas = step.set_replicas
        if step.submit:
            failed = await _submit(admin, step.submit, events)
            if failed:
                op_message = (
                    step.message
                    + f"; {len(failed)} moves refused (retried next pass): "
                    + "; ".join(failed[:3])
                )
        if step.finished:
            events.append(Event("Normal", report.EVENT_COMPLETED, step.message))
            st = replace(st, operation=None, last_scale_time=now)
            progress = Progress(False, report.COMPLETED, f"{step.message} at {report.rfc3339(now)}")
        elif step.aborted is not None:
            events.append(Event("Warning", report.EVENT_ABORTED, step.aborted))
            st = replace(st, operation=None, last_scale_time=now)
            progress = Progress(False, report.ABORTED, step.aborted)
        else:
            assert step.operation is not None
            st = replace(st, operation=step.operation)
            progress = Progress(True, step.operation.phase, op_message or step.message)

    r = Report(
        active_reason,
        active_message,
        decision=decision if decision is not None and decision.valid else None,
        largest_rf=largest_rf,
        progress=progress,
        decided_at=now if decision is not None else None,
    )
    if replicas == spec.replicas:
        replicas = None
    return finish(r, st, replicas, op_message)


async def _step(
    op: ops.Operation, observed: ops.Observed, now: float, settings: AutoscaleSettings
) -> ops.Step:
    """Advance `op`; planning a large cluster takes a moment, so off the event loop."""
    return await asyncio.to_thread(
        ops.step,
        op,
        observed,
        now,
        max_in_flight=settings.max_in_flight,
        timeout=settings.operation_timeout,
    )


def _idle_progress(st: State, prev: Mapping[str, Any]) -> Progress:
    """Progressing when this pass does not advance an operation: as it was (the last Completed or
    OperationAborted stays visible until the next operation)."""
    if st.operation is not None:
        op = st.operation
        return Progress(
            True, op.phase, f"{op.kind} {op.source} → {op.target}: waiting (see AutoscalingActive)"
        )
    for c in prev.get("conditions") or []:
        if (
            isinstance(c, Mapping)
            and c.get("type") == report.PROGRESSING
            and c.get("status") == "False"
            and c.get("reason") in (report.COMPLETED, report.ABORTED)
        ):
            return Progress(False, str(c["reason"]), str(c.get("message", "")))
    return Progress(False, report.IDLE, "no scaling operation")


async def _submit(admin: AutoscaleAdmin, moves: Sequence[Move], events: list[Event]) -> list[str]:
    """Start `moves`; returns the refused ones as text (Events: the started and the refused)."""
    try:
        answers = await admin.alter_reassignments({m.key: m.target for m in moves})
    except AdminError as e:
        events.append(Event("Warning", report.EVENT_MOVE_FAILED, f"AlterPartitionReassignments: {e}"))
        return [str(e)]
    started = [m for m in moves if answers.get(m.key) is None]
    failed = [f"{m}: {answers[m.key]}" for m in moves if answers.get(m.key) is not None]
    if started:
        events.append(Event("Normal", report.EVENT_MOVING, "; ".join(str(m) for m in started)))
    if failed:
        events.append(Event("Warning", report.EVENT_MOVE_FAILED, "; ".join(failed)))
    log.info("reassignments started: %s; refused: %s", [str(m) for m in started], failed)
    return failed


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(str(i) for i in ids) or "none"
