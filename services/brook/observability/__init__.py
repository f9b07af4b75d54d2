"""Observability: Prometheus metrics with Kafka's meaning, and the /metrics, /healthz, /readyz listener.

`BrokerMetrics` counts events from the hot paths and, given a `BrokerView`, exports the broker's state
at scrape time; `MetricsServer` serves its registry. The metric list and the Kafka MBean each one stands
for are in `brook.observability.metrics`. `assets/` holds the Prometheus alert and recording rules
(with their `promtool test rules` file) and the Grafana dashboard.

This package imports nothing from the broker but the protocol's enums, so any layer may use it.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable

from .collector import StateCollector
from .metrics import (
    CONSUMER,
    FOLLOWER,
    LATENCY_BUCKETS,
    REQUEST_ROLE,
    BrokerMetrics,
    error_name,
    request_name,
)
from .server import MetricsServer, ReadyCheck
from .view import BrokerView, GroupOffset, PartitionView


def assets() -> Traversable:
    """The directory of alerts.yaml, alerts_test.yaml and grafana-dashboard.json."""
    return files(__name__) / "assets"


__all__ = [
    "CONSUMER",
    "FOLLOWER",
    "LATENCY_BUCKETS",
    "REQUEST_ROLE",
    "BrokerMetrics",
    "BrokerView",
    "GroupOffset",
    "MetricsServer",
    "PartitionView",
    "ReadyCheck",
    "StateCollector",
    "assets",
    "error_name",
    "request_name",
]
