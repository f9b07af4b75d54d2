"""The kopf timer applies a pass: status.autoscaling, spec.replicas and one Event per decision."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import kopf
import pytest

from brook_operator.cluster import OperatorSettings
from brook_operator.handlers import autoscaling as handler
from brook_operator.handlers.runtime import Runtime
from brook_operator.prometheus import BrokerLoad

from .test_autoscaling_flow import KIB, FakeKafka, FakePrometheus, cluster, rf2


class Pool:
    def __init__(self, kafka: FakeKafka) -> None:
        self.kafka = kafka
        self.asked: list[str] = []

    def get(self, bootstrap: str, security: Mapping[str, str] | None = None) -> FakeKafka:
        self.asked.append(bootstrap)
        return self.kafka


def test_the_timer_patches_replicas_and_status_and_posts_events(monkeypatch: pytest.MonkeyPatch) -> None:
    kafka, metrics = FakeKafka(2, rf2(4, 2)), FakePrometheus()
    metrics.bytes_in = 61 * KIB
    seen: list[tuple[str, str, str]] = []

    async def load(url: str, selector: str, *, bytes_in: bool, partitions: bool, window: str) -> BrokerLoad:
        return await metrics(url, selector, bytes_in=bytes_in, partitions=partitions, window=window)

    def event(obj: Any, *, type: str, reason: str, message: str = "") -> None:
        seen.append((type, reason, message))

    monkeypatch.setattr(handler, "load_from_prometheus", load)
    monkeypatch.setattr(kopf, "event", event)
    pool = Pool(kafka)
    memo = Runtime(
        kube=None,  # type: ignore[arg-type]
        admins=pool,  # type: ignore[arg-type]
        settings=OperatorSettings(default_image="x", bootstrap_template="127.0.0.1:{port}"),
    )
    body = kopf.Body(cluster())
    patch = kopf.Patch()
    asyncio.run(handler.cluster_autoscale(body=body, patch=patch, memo=memo))
    assert patch["spec"] == {"replicas": 3}
    st = patch["status"]["autoscaling"]
    assert st["lastDecision"]["action"] == "ScaleUp" and st["operation"]["kind"] == "ScaleOut"
    assert [(t, r) for t, r, _ in seen] == [("Normal", "ScaleUp")]
    assert pool.asked == ["127.0.0.1:9092"]  # the operator's bootstrap template
    assert memo.autoscaling["u1"].operation is not None  # kept for the next pass

    # The next pass continues from memory even if the body has not caught up with the patch yet.
    kafka.brokers.append(2)
    patch = kopf.Patch()
    asyncio.run(handler.cluster_autoscale(body=body, patch=patch, memo=memo))
    assert patch["status"]["autoscaling"]["operation"]["phase"] == "MovingPartitions"
    assert kafka.submitted


def test_the_interval_and_settings_come_from_the_environment() -> None:
    assert handler.INTERVAL_SECONDS > 0
    assert handler.SETTINGS.max_in_flight >= 1
    assert "{name}" in handler.SETTINGS.selector and "{namespace}" in handler.SETTINGS.selector
