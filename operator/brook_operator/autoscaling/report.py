"""The autoscaler's state in `status.autoscaling`, its conditions and reasons (pure).

`status.autoscaling` holds the last decision with the numbers behind it, the metrics, the recent
recommendations (the stabilization windows survive an operator restart), the operation in progress
and three conditions of its own (kept apart from the Cluster's Ready/Progressing/Degraded, which the
reconcile pass rewrites as a whole):

- AutoscalingActive: True (ValidMetrics) when a decision was made from fresh metrics; else False with
  AutoscalingDisabled, InvalidAutoscalingConfig, InvalidSpec, PrometheusUnreachable, QueryFailed,
  MetricNotFound or KafkaUnavailable. The cluster keeps its size whenever it is False.
- AutoscalingLimited: True when the bounds cut the recommendation (TooManyReplicas, TooFewReplicas,
  ReplicationFactorFloor), else False (DesiredWithinRange).
- AutoscalingProgressing: True while an operation runs (reason: its phase), else False (Idle,
  Completed, OperationAborted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import status as cluster_status
from .decide import Decision, MetricValue, Recommendation
from .operation import SCALE_IN, SCALE_OUT, Operation

ACTIVE = "AutoscalingActive"
LIMITED = "AutoscalingLimited"
PROGRESSING = "AutoscalingProgressing"
CONDITION_TYPES = (ACTIVE, LIMITED, PROGRESSING)

# AutoscalingActive
VALID_METRICS = "ValidMetrics"
DISABLED = "AutoscalingDisabled"
INVALID_CONFIG = "InvalidAutoscalingConfig"
INVALID_SPEC = "InvalidSpec"
PROMETHEUS_UNREACHABLE = "PrometheusUnreachable"
QUERY_FAILED = "QueryFailed"
METRIC_NOT_FOUND = "MetricNotFound"
KAFKA_UNAVAILABLE = "KafkaUnavailable"
# AutoscalingLimited (besides decide's TooManyReplicas, TooFewReplicas, ReplicationFactorFloor)
WITHIN_RANGE = "DesiredWithinRange"
# AutoscalingProgressing (True: the operation's phase)
IDLE = "Idle"
COMPLETED = "Completed"
ABORTED = "OperationAborted"

ACTIVE_REASONS = frozenset(
    {
        VALID_METRICS,
        DISABLED,
        INVALID_CONFIG,
        INVALID_SPEC,
        PROMETHEUS_UNREACHABLE,
        QUERY_FAILED,
        METRIC_NOT_FOUND,
        KAFKA_UNAVAILABLE,
    }
)

# Event reasons (besides the ACTIVE_REASONS of failures, posted as Warnings when they first appear)
EVENT_SCALE_UP = "ScaleUp"
EVENT_SCALE_DOWN = "ScaleDown"
EVENT_HOLD = "AutoscalingDecision"  # a new decision that keeps the size (the message says why)
EVENT_MOVING = "PartitionsMoving"
EVENT_MOVE_FAILED = "PartitionMoveFailed"
EVENT_COMPLETED = "ScalingCompleted"
EVENT_ABORTED = "ScalingAborted"


@dataclass(frozen=True, slots=True)
class State:
    """What the autoscaler carries from one pass to the next (also stored in status.autoscaling)."""

    history: tuple[Recommendation, ...] = ()
    last_scale_time: float | None = None  # when the last operation finished (the cooldown's start)
    operation: Operation | None = None
    last_decision_key: tuple[str, str, int] | None = None  # (action, reason, desired) of the last Event
    last_problem: str | None = None  # the failure reason last reported by an Event


@dataclass(frozen=True, slots=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Progress:
    """The AutoscalingProgressing condition's content for this pass."""

    active: bool
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Report:
    active_reason: str
    active_message: str
    decision: Decision | None = None
    largest_rf: int | None = None
    progress: Progress = field(default_factory=lambda: Progress(False, IDLE, "no scaling operation"))
    decided_at: float | None = None


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_time(s: Any) -> float | None:
    if not isinstance(s, str) or not s:
        return None
    try:
        return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def state_from_status(st: Mapping[str, Any] | None) -> State:
    """The state a previous pass stored (a restarted operator resumes from it); tolerant of garbage."""
    st = st or {}
    history = []
    for r in st.get("recommendations") or []:
        t = parse_time(r.get("time")) if isinstance(r, Mapping) else None
        n = r.get("replicas") if isinstance(r, Mapping) else None
        if t is not None and isinstance(n, int):
            history.append(Recommendation(t, n))
    op: Operation | None = None
    o = st.get("operation")
    if isinstance(o, Mapping):
        started = parse_time(o.get("startTime"))
        kind, phase = o.get("kind"), o.get("phase")
        src, dst = o.get("sourceReplicas"), o.get("targetReplicas")
        if (
            started is not None
            and kind in (SCALE_OUT, SCALE_IN)
            and isinstance(phase, str)
            and isinstance(src, int)
            and isinstance(dst, int)
        ):
            moves = o.get("movesStarted")
            op = Operation(str(kind), src, dst, started, phase, moves if isinstance(moves, int) else 0)
    key: tuple[str, str, int] | None = None
    d = st.get("lastDecision")
    if isinstance(d, Mapping) and isinstance(d.get("desiredReplicas"), int):
        key = (str(d.get("action")), str(d.get("reason")), int(d["desiredReplicas"]))
    problem = None
    for c in st.get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == ACTIVE and c.get("status") == "False":
            problem = str(c.get("reason"))
    return State(
        tuple(sorted(history, key=lambda r: r.time)),
        parse_time(st.get("lastScaleTime")),
        op,
        key,
        problem,
    )


def metric_status(m: MetricValue) -> dict[str, Any]:
    return {
        "name": m.name,
        "total": round(m.total, 3),
        "perBroker": round(m.per_broker, 3),
        "target": m.target,
        "ratio": round(m.ratio, 3),
        "replicas": m.replicas,
    }


def decision_status(d: Decision, at: float) -> dict[str, Any]:
    return {
        "time": rfc3339(at),
        "action": d.action,
        "reason": d.reason,
        "message": d.message,
        "currentReplicas": d.current,
        "desiredReplicas": d.desired,
        "recommendedReplicas": d.recommended,
        "stabilizedReplicas": d.stabilized,
        "minReplicas": d.lower,
        "maxReplicas": d.upper,
    }


def operation_status(op: Operation, message: str) -> dict[str, Any]:
    return {
        "kind": op.kind,
        "sourceReplicas": op.source,
        "targetReplicas": op.target,
        "phase": op.phase,
        "startTime": rfc3339(op.started),
        "movesStarted": op.moves_started,
        "message": message,
    }


def conditions(r: Report, previous: Sequence[Mapping[str, Any]] | None) -> list[cluster_status.Condition]:
    """This pass's conditions; AutoscalingLimited keeps its previous value when nothing was decided."""
    out = [
        cluster_status.Condition(
            ACTIVE,
            cluster_status.TRUE if r.active_reason == VALID_METRICS else cluster_status.FALSE,
            r.active_reason,
            r.active_message,
        )
    ]
    if r.decision is not None and r.decision.valid:
        d = r.decision
        if d.limited is not None:
            out.append(cluster_status.Condition(LIMITED, cluster_status.TRUE, d.limited, _limited_message(d)))
        else:
            out.append(
                cluster_status.Condition(
                    LIMITED,
                    cluster_status.FALSE,
                    WITHIN_RANGE,
                    f"desired {d.desired} in [{d.lower}, {d.upper}]",
                )
            )
    else:
        old = next((c for c in previous or () if c.get("type") == LIMITED), None)
        if old is not None:
            out.append(
                cluster_status.Condition(
                    LIMITED, str(old.get("status")), str(old.get("reason")), str(old.get("message", ""))
                )
            )
    p = r.progress
    out.append(
        cluster_status.Condition(
            PROGRESSING, cluster_status.TRUE if p.active else cluster_status.FALSE, p.reason, p.message
        )
    )
    return out


def _limited_message(d: Decision) -> str:
    if d.stabilized > d.upper:
        return f"the metrics ask for {d.stabilized} brokers; maxReplicas is {d.upper}"
    return f"the metrics ask for {d.stabilized} brokers; the minimum is {d.lower}"


def render(
    r: Report,
    state: State,
    previous: Mapping[str, Any] | None,
    *,
    now: float,
    generation: int | None,
    operation_message: str | None = None,
) -> dict[str, Any]:
    """status.autoscaling for this pass."""
    prev = dict(previous or {})
    out: dict[str, Any] = {}
    if r.decision is not None and r.decided_at is not None:
        d = r.decision
        out["lastDecision"] = decision_status(d, r.decided_at)
        out["currentReplicas"] = d.current
        out["desiredReplicas"] = d.desired
        out["metrics"] = [metric_status(m) for m in d.metrics]
    else:
        for k in ("lastDecision", "currentReplicas", "desiredReplicas", "metrics"):
            if k in prev:
                out[k] = prev[k]
    if r.largest_rf is not None:
        out["largestReplicationFactor"] = r.largest_rf
    elif "largestReplicationFactor" in prev:
        out["largestReplicationFactor"] = prev["largestReplicationFactor"]
    out["recommendations"] = [{"time": rfc3339(h.time), "replicas": h.replicas} for h in state.history]
    out["lastScaleTime"] = rfc3339(state.last_scale_time) if state.last_scale_time is not None else None
    out["operation"] = (
        operation_status(state.operation, operation_message or r.progress.message)
        if state.operation is not None
        else None
    )
    out["conditions"] = cluster_status.merge_conditions(
        prev.get("conditions"), conditions(r, prev.get("conditions")), now=rfc3339(now), generation=generation
    )
    return out
