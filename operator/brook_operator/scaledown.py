"""Scale-down guard (pure): brokers leave only once they hold no partition replicas.

A StatefulSet scale-down removes the highest ordinals. Kafka does not move replicas by itself, so the
operator keeps the current replica count (and reports ScaleDownBlocked) while any departing broker is
still a replica of some partition; reassign those partitions first.
"""

from __future__ import annotations

from dataclasses import dataclass

from .facts import ClusterSnapshot, replicas_by_broker


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    replicas: int  # what the StatefulSet gets
    blocked: str | None = None  # why spec.replicas is not applied


def plan_replicas(desired: int, current: int | None, snapshot: ClusterSnapshot | None) -> ScaleDecision:
    """`current` is the StatefulSet's replica count (None: not created yet)."""
    if current is None or desired >= current:
        return ScaleDecision(desired)
    if snapshot is None:
        return ScaleDecision(
            current, f"scale-down to {desired} waits: the cluster's Metadata is unavailable to check replicas"
        )
    held = replicas_by_broker(snapshot.partitions)
    departing = {b: held[b] for b in range(desired, current) if held.get(b)}
    if not departing:
        return ScaleDecision(desired)
    parts = []
    for b, tps in departing.items():
        sample = ", ".join(tps[:3]) + (", ..." if len(tps) > 3 else "")
        parts.append(f"broker {b} holds {len(tps)} partition replicas ({sample})")
    return ScaleDecision(current, f"scale-down to {desired} refused: {'; '.join(parts)}; reassign them first")
