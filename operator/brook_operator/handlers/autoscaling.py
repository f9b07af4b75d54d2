"""Cluster autoscaling: a timer runs one autoscaler pass (autoscaling/flow.py) per Cluster and applies
its result: status.autoscaling, spec.replicas (the Cluster handlers then resize the StatefulSet) and
one Kubernetes Event per decision, with the numbers behind it."""

from __future__ import annotations

import os
import time
from typing import Any

import kopf

from .. import GROUP, VERSION, prometheus
from ..admin_access import cluster_admin
from ..autoscaling.flow import AutoscaleAdmin, AutoscaleSettings, autoscale
from ..spec import ClusterSpec
from .runtime import Runtime

INTERVAL_SECONDS = float(os.environ.get("BROOK_OPERATOR_AUTOSCALE_INTERVAL", "15"))
PROMETHEUS_TIMEOUT = float(os.environ.get("BROOK_OPERATOR_PROMETHEUS_TIMEOUT", "5"))
SETTINGS = AutoscaleSettings(
    selector=os.environ.get("BROOK_OPERATOR_AUTOSCALE_SELECTOR", prometheus.DEFAULT_SELECTOR),
    rate_window=os.environ.get("BROOK_OPERATOR_AUTOSCALE_RATE_WINDOW", prometheus.DEFAULT_RATE_WINDOW),
    max_in_flight=int(os.environ.get("BROOK_OPERATOR_AUTOSCALE_MAX_MOVES", "5")),
    operation_timeout=float(os.environ.get("BROOK_OPERATOR_AUTOSCALE_OPERATION_TIMEOUT", "3600")),
)


async def load_from_prometheus(
    url: str, selector: str, *, bytes_in: bool, partitions: bool, window: str
) -> prometheus.BrokerLoad:
    return await prometheus.broker_load(
        prometheus.Prometheus(url, timeout=PROMETHEUS_TIMEOUT),
        selector,
        bytes_in=bytes_in,
        partitions=partitions,
        window=window,
    )


@kopf.timer(GROUP, VERSION, "clusters", interval=INTERVAL_SECONDS, initial_delay=INTERVAL_SECONDS)
async def cluster_autoscale(body: kopf.Body, patch: kopf.Patch, memo: Runtime, **_: Any) -> None:
    name, namespace = body.metadata.name or "", body.metadata.namespace or ""
    uid = body.metadata.uid or f"{namespace}/{name}"

    async def admin_of(spec: ClusterSpec) -> AutoscaleAdmin:
        s = memo.settings
        return await cluster_admin(
            memo.admins.get, memo.kube, name, namespace, spec, s.bootstrap_template, s.verify_hostname
        )

    async with memo.lock("autoscale", namespace, name):
        result = await autoscale(
            body,
            state=memo.autoscaling.get(uid),
            load=load_from_prometheus,
            settings=SETTINGS,
            admin_of=admin_of,
            now=time.time(),
        )
        memo.autoscaling[uid] = result.state
    if result.status is not None:
        patch.status["autoscaling"] = result.status
    if result.replicas is not None:
        patch.spec["replicas"] = result.replicas
    for ev in result.events:
        kopf.event(body, type=ev.type, reason=ev.reason, message=ev.message)
