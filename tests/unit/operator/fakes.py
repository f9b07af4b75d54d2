"""In-memory stand-ins for the Kubernetes API (with kube.Kube's apply semantics) and a Kafka cluster."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from brook_operator.apply import check_ownership, prepare_replace, unchanged, with_applied_hash
from brook_operator.facts import AdminError, ClusterSnapshot


class FakeKube:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str, str]] = []
        self._rv = itertools.count(1)

    def put(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        meta.setdefault("resourceVersion", str(next(self._rv)))
        self.objects[(obj["kind"], meta.get("namespace"), meta["name"])] = copy.deepcopy(obj)

    async def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        obj = self.objects.get((kind, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    async def list(
        self, kind: str, namespace: str | None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        want = dict(p.split("=", 1) for p in (label_selector or "").split(",") if p)
        out = []
        for (k, ns, _), obj in sorted(self.objects.items()):
            labels = obj["metadata"].get("labels") or {}
            if k == kind and ns == namespace and all(labels.get(a) == b for a, b in want.items()):
                out.append(copy.deepcopy(obj))
        return out

    async def delete(self, kind: str, namespace: str | None, name: str) -> bool:
        self.calls.append(("delete", kind, name))
        return self.objects.pop((kind, namespace, name), None) is not None

    async def apply(self, manifest: Mapping[str, Any]) -> str:
        desired, h = with_applied_hash(dict(manifest))
        meta = desired["metadata"]
        live = await self.get(desired["kind"], meta.get("namespace"), meta["name"])
        if live is None:
            self.calls.append(("create", desired["kind"], meta["name"]))
            self.put(desired)
            return "created"
        if unchanged(live, h):
            return "unchanged"
        check_ownership(live, desired)
        body = prepare_replace(live, desired)
        body["metadata"]["resourceVersion"] = str(next(self._rv))
        self.calls.append(("update", desired["kind"], meta["name"]))
        self.put(body)
        return "updated"


class FakeClusterAdmin:
    def __init__(
        self, snapshot: ClusterSnapshot | None = None, min_isr: dict[str, int] | None = None
    ) -> None:
        self.snapshot_value = snapshot
        self.min_isr = min_isr or {}

    async def snapshot(self) -> ClusterSnapshot:
        if self.snapshot_value is None:
            raise AdminError("Metadata: Local: Broker transport failure", code="_TRANSPORT", unavailable=True)
        return self.snapshot_value

    async def min_insync_replicas(self, topics: Iterable[str]) -> dict[str, int]:
        return {t: self.min_isr[t] for t in topics if t in self.min_isr}
