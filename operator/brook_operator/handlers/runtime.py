"""What the handlers share (kopf's `memo`): the Kubernetes client, the Kafka admin pool, settings."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..autoscaling.report import State as AutoscalingState
from ..cluster import OperatorSettings
from ..kafka_admin import AdminPool
from ..kube import Kube


@dataclass
class Runtime:
    kube: Kube
    admins: AdminPool
    settings: OperatorSettings
    locks: dict[tuple[str, ...], asyncio.Lock] = field(default_factory=dict)
    # Cluster uid → the autoscaler's state after its last pass (newer than a status not yet seen back).
    autoscaling: dict[str, AutoscalingState] = field(default_factory=dict)

    def lock(self, *key: str) -> asyncio.Lock:
        """One lock per object: a timer pass and a change handler never reconcile it concurrently."""
        lk = self.locks.get(key)
        if lk is None:
            lk = self.locks[key] = asyncio.Lock()
        return lk


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
