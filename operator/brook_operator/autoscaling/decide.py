"""How many brokers (pure): a HorizontalPodAutoscaler's arithmetic over Brook's load metrics.

Per target, the metric's per-broker average over the current brokers is compared with the target:
`ratio = average / target`; within the tolerance (10 %, as HPA) the metric asks for the current count,
else for `ceil(current * ratio)` (= ceil(total / target)). The recommendation is the maximum over the
targets. Recommendations are kept with their times; scaling up follows the *smallest* recommendation
of the scale-up window and scaling down the *largest* of the scale-down window (HPA's stabilization),
so a short spike or dip changes nothing and a decision is not reversed within a window. The result is
clamped to [max(minReplicas, largest replication factor), maxReplicas]; after an action nothing is done
for `cooldown` seconds. Times are seconds on one clock (the caller's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..spec import Autoscaling

TOLERANCE = 0.1  # HPA's default --horizontal-pod-autoscaler-tolerance

BYTES_IN = "bytesInPerBroker"
PARTITIONS = "partitionsPerBroker"

# Actions
SCALE_UP = "ScaleUp"
SCALE_DOWN = "ScaleDown"
NONE = "None"

# Decision reasons
METRIC_ABOVE_TARGET = "MetricAboveTarget"  # scale up: a metric per broker is above its target
METRIC_BELOW_TARGET = "MetricBelowTarget"  # scale down: every metric per broker is below its target
BELOW_MINIMUM = "BelowMinimum"  # scale up: fewer brokers than minReplicas / the largest RF
ABOVE_MAXIMUM = "AboveMaximum"  # scale down: more brokers than maxReplicas
NO_CHANGE = "NoChangeNeeded"  # hold: the metrics ask for the current count (or are within the tolerance)
STABILIZING = "Stabilizing"  # hold: the metrics ask for a change the window does not confirm yet
COOLING_DOWN = "CoolingDown"  # hold: the last action is more recent than cooldownSeconds
LIMITED = "Limited"  # hold: the bounds keep the current count although the metrics ask for a change
INVALID_CONFIG = "InvalidAutoscalingConfig"  # hold: the bounds are contradictory

# Why the bounds changed the recommendation (the AutoscalingLimited condition)
TOO_MANY_REPLICAS = "TooManyReplicas"  # above maxReplicas
TOO_FEW_REPLICAS = "TooFewReplicas"  # below minReplicas
REPLICATION_FACTOR_FLOOR = "ReplicationFactorFloor"  # below the largest replication factor

DECISION_REASONS = frozenset(
    {
        METRIC_ABOVE_TARGET,
        METRIC_BELOW_TARGET,
        BELOW_MINIMUM,
        ABOVE_MAXIMUM,
        NO_CHANGE,
        STABILIZING,
        COOLING_DOWN,
        LIMITED,
        INVALID_CONFIG,
    }
)


@dataclass(frozen=True, slots=True)
class Policy:
    min_replicas: int
    max_replicas: int
    bytes_in_per_broker: int | None = None  # bytes/s
    partitions_per_broker: int | None = None  # partition replicas
    scale_up_window: float = 300.0
    scale_down_window: float = 900.0
    cooldown: float = 600.0
    tolerance: float = TOLERANCE

    @classmethod
    def from_spec(cls, a: Autoscaling) -> Policy:
        return cls(
            min_replicas=a.min_replicas,
            max_replicas=a.max_replicas if a.max_replicas is not None else a.min_replicas,
            bytes_in_per_broker=a.bytes_in_per_broker,
            partitions_per_broker=a.partitions_per_broker,
            scale_up_window=float(a.scale_up_window_seconds),
            scale_down_window=float(a.scale_down_window_seconds),
            cooldown=float(a.cooldown_seconds),
        )

    @property
    def targets(self) -> dict[str, int]:
        out = {}
        if self.bytes_in_per_broker is not None:
            out[BYTES_IN] = self.bytes_in_per_broker
        if self.partitions_per_broker is not None:
            out[PARTITIONS] = self.partitions_per_broker
        return out

    @property
    def history_window(self) -> float:
        return max(self.scale_up_window, self.scale_down_window)


@dataclass(frozen=True, slots=True)
class Observation:
    current_replicas: int  # the Cluster's spec.replicas
    largest_replication_factor: int  # over every partition (0: no partitions)
    bytes_in: Mapping[int, float] | None = None  # broker id → bytes/s appended by producers
    partitions: Mapping[int, float] | None = None  # broker id → partition replicas hosted


@dataclass(frozen=True, slots=True)
class Recommendation:
    time: float
    replicas: int


@dataclass(frozen=True, slots=True)
class MetricValue:
    name: str  # BYTES_IN | PARTITIONS
    total: float  # over all brokers
    per_broker: float  # total / current brokers
    target: int
    ratio: float  # per_broker / target
    replicas: int  # what this metric alone asks for (the current count within the tolerance)


@dataclass(frozen=True, slots=True)
class Decision:
    current: int
    desired: int  # the count the cluster should move to (== current when holding)
    action: str  # SCALE_UP | SCALE_DOWN | NONE
    reason: str
    message: str
    recommended: int  # from the metrics now (max over targets), before the windows
    stabilized: int  # after the stabilization windows, before the bounds
    lower: int  # max(minReplicas, largest replication factor)
    upper: int  # maxReplicas
    limited: str | None  # TOO_MANY_REPLICAS | TOO_FEW_REPLICAS | REPLICATION_FACTOR_FLOOR | None
    metrics: tuple[MetricValue, ...]
    history: tuple[Recommendation, ...]  # the recommendations to pass to the next decision

    @property
    def valid(self) -> bool:
        return self.reason != INVALID_CONFIG


def config_errors(policy: Policy, largest_rf: int = 0) -> list[str]:
    """Contradictory bounds (the CRD rejects min > max; the replication factor is only known live)."""
    errors = []
    if policy.min_replicas > policy.max_replicas:
        errors.append(f"minReplicas {policy.min_replicas} exceeds maxReplicas {policy.max_replicas}")
    elif largest_rf > policy.max_replicas:
        errors.append(
            f"maxReplicas {policy.max_replicas} is below the largest replication factor {largest_rf} "
            "(a cluster never has fewer brokers than its largest replication factor)"
        )
    if not policy.targets:
        errors.append("no target: set targets.bytesInPerBroker or targets.partitionsPerBroker")
    return errors


def record(history: Sequence[Recommendation], rec: Recommendation, keep: float) -> tuple[Recommendation, ...]:
    """`history` plus `rec`, without entries older than `keep` seconds before it.

    Consecutive equal recommendations are stored once, with the latest time: "some recommendation in
    the window" only depends on the latest time of each run, so the list stays short.
    """
    out = [r for r in history if r.time > rec.time - keep and r.time <= rec.time]
    if out and out[-1].replicas == rec.replicas:
        out[-1] = rec
    else:
        out.append(rec)
    return tuple(out)


def _metric(name: str, values: Mapping[int, float], target: int, current: int, tol: float) -> MetricValue:
    total = float(sum(values.values()))
    per_broker = total / current
    ratio = per_broker / target
    replicas = current if abs(ratio - 1.0) <= tol else max(0, math.ceil(total / target - 1e-9))
    return MetricValue(name, total, per_broker, target, ratio, replicas)


def decide(
    policy: Policy,
    obs: Observation,
    history: Sequence[Recommendation],
    last_scale_time: float | None,
    now: float,
) -> Decision:
    current = obs.current_replicas
    lower = max(policy.min_replicas, obs.largest_replication_factor)
    upper = policy.max_replicas
    errors = config_errors(policy, obs.largest_replication_factor)
    if errors:
        return Decision(
            current, current, NONE, INVALID_CONFIG, "; ".join(errors), current, current, lower, upper,
            None, (), tuple(history),
        )  # fmt: skip

    metrics: list[MetricValue] = []
    for name, target in policy.targets.items():
        values = obs.bytes_in if name == BYTES_IN else obs.partitions
        if values is None:
            raise ValueError(f"no {name} values observed for a configured target")
        metrics.append(_metric(name, values, target, current, policy.tolerance))
    recommended = max(m.replicas for m in metrics)

    hist = record(history, Recommendation(now, recommended), policy.history_window)
    up_window = [r.replicas for r in hist if r.time > now - policy.scale_up_window] + [recommended]
    down_window = [r.replicas for r in hist if r.time > now - policy.scale_down_window] + [recommended]
    stabilized = current
    stabilized = max(stabilized, min(up_window))
    stabilized = min(stabilized, max(down_window))

    desired = min(max(stabilized, lower), upper)
    limited: str | None = None
    if stabilized > upper:
        limited = TOO_MANY_REPLICAS
    elif stabilized < lower:
        limited = (
            TOO_FEW_REPLICAS
            if policy.min_replicas >= obs.largest_replication_factor
            else (REPLICATION_FACTOR_FLOOR)
        )

    if desired > current:
        action = SCALE_UP
        reason = BELOW_MINIMUM if current < lower and stabilized <= current else METRIC_ABOVE_TARGET
    elif desired < current:
        action = SCALE_DOWN
        reason = ABOVE_MAXIMUM if current > upper and stabilized >= current else METRIC_BELOW_TARGET
    else:
        action = NONE
        if recommended == current:
            reason = NO_CHANGE
        elif stabilized == current:
            reason = STABILIZING
        else:
            reason = LIMITED
    if action != NONE and last_scale_time is not None and now - last_scale_time < policy.cooldown:
        wait = policy.cooldown - (now - last_scale_time)
        message = f"{_summary(current, desired, metrics, recommended, stabilized, lower, upper)}; " + (
            f"cooling down for {wait:.0f}s more (cooldownSeconds {policy.cooldown:.0f})"
        )
        return Decision(
            current, current, NONE, COOLING_DOWN, message, recommended, stabilized, lower, upper, limited,
            tuple(metrics), hist,
        )  # fmt: skip
    message = _summary(current, desired, metrics, recommended, stabilized, lower, upper)
    return Decision(
        current, desired, action, reason, message, recommended, stabilized, lower, upper, limited,
        tuple(metrics), hist,
    )  # fmt: skip


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def describe_metric(m: MetricValue, current: int) -> str:
    if m.name == BYTES_IN:
        total, per, target = (
            human_bytes(m.total) + "/s",
            human_bytes(m.per_broker) + "/s",
            (human_bytes(m.target) + "/s"),
        )
        what = "bytes in"
    else:
        total, per, target = f"{m.total:.0f}", f"{m.per_broker:.1f}", str(m.target)
        what = "partition replicas"
    return (
        f"{what} {total} over {current} brokers = {per} per broker, target {target} "
        f"(ratio {m.ratio:.2f}) → {m.replicas}"
    )


def _summary(
    current: int,
    desired: int,
    metrics: Sequence[MetricValue],
    recommended: int,
    stabilized: int,
    lower: int,
    upper: int,
) -> str:
    parts = [describe_metric(m, current) for m in metrics]
    verdict = f"{current} → {desired} brokers" if desired != current else f"keep {current} brokers"
    return (
        "; ".join(parts)
        + f"; recommended {recommended}, stabilized {stabilized}, bounds [{lower}, {upper}]: {verdict}"
    )
