"""Rolling-restart planner (pure): which broker pod to restart next, or why to wait.

The StatefulSet uses updateStrategy OnDelete, so pods keep their old template until the operator
deletes them; this planner decides when. Rules, in order:
1. Nothing outdated: done.
2. A pod is terminating or not yet re-created: wait (one restart at a time).
3. An outdated pod that is not ready is restarted first: it serves nothing, so restarting it costs no
   availability (and a crash-looping pod with a bad config gets the fixed one).
4. Any other pod not ready (e.g. the one just restarted): wait until it is ready.
5. Without the cluster's Metadata: wait (availability cannot be checked).
6. Under-replicated partitions: wait until every follower has caught up.
7. Restart an outdated broker whose restart leaves every partition it is in-sync for with at least
   min.insync.replicas in-sync replicas; the controller last, then highest ordinal first. Partitions whose
   replica count is not above min.insync.replicas (e.g. replication factor 1) cannot stay available
   through any restart and do not block.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .facts import PartitionInfo


@dataclass(frozen=True, slots=True)
class PodState:
    name: str
    ordinal: int  # also the broker id
    ready: bool
    up_to_date: bool  # runs the StatefulSet's current pod template
    terminating: bool = False


@dataclass(frozen=True, slots=True)
class RollPlan:
    restart: str | None = None  # the pod to delete now
    waiting: str | None = None  # why nothing is restarted although pods are outdated
    done: bool = False  # no pod is outdated

    @property
    def outdated(self) -> bool:
        return not self.done


def blocking_partitions(
    broker: int, partitions: Sequence[PartitionInfo], min_isr: Callable[[str], int]
) -> list[PartitionInfo]:
    """Partitions that would fall below min.insync.replicas if `broker` went down now."""
    out = []
    for p in partitions:
        m = min_isr(p.topic)
        if len(p.replicas) <= m:
            continue  # can never tolerate a missing replica: no order of restarts helps
        if broker in p.isr and len(p.isr) - 1 < m:
            out.append(p)
    return out


def plan_roll(
    pods: Sequence[PodState],
    *,
    partitions: Sequence[PartitionInfo] | None,
    min_isr: Callable[[str], int],
    controller_id: int | None = None,
    expected_pods: int | None = None,
) -> RollPlan:
    outdated = [p for p in pods if not p.up_to_date]
    if not outdated:
        return RollPlan(done=True)
    if terminating := [p for p in pods if p.terminating]:
        return RollPlan(waiting=f"waiting for pod {terminating[0].name} to terminate")
    if expected_pods is not None and len(pods) < expected_pods:
        return RollPlan(waiting=f"waiting for {expected_pods - len(pods)} pods to be created")
    order = sorted(outdated, key=lambda p: (p.ordinal == controller_id, -p.ordinal))
    if down := [p for p in order if not p.ready]:
        return RollPlan(restart=down[0].name)
    if unready := [p for p in pods if not p.ready]:
        return RollPlan(waiting=f"waiting for pod {unready[0].name} to become ready")
    if partitions is None:
        return RollPlan(waiting="waiting for the cluster's Metadata to check partition availability")
    urp = sum(1 for p in partitions if p.under_replicated)
    if urp:
        return RollPlan(waiting=f"waiting for {urp} under-replicated partitions to catch up")
    blocked: list[str] = []
    for pod in order:
        bad = blocking_partitions(pod.ordinal, partitions, min_isr)
        if not bad:
            return RollPlan(restart=pod.name)
        blocked.append(f"{pod.name} ({bad[0].topic}-{bad[0].partition})")
    return RollPlan(
        waiting="restarting any outdated broker would leave partitions below min.insync.replicas: "
        + ", ".join(blocked)
    )
