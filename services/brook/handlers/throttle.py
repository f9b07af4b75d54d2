"""Charging a request to its client's quotas: the throttle it earns is answered in throttle_time_ms
(Produce, Fetch) and the connection is muted for that long (THROTTLE_MS, read by the connection)."""

from __future__ import annotations

import time

from brook.broker.broker import Broker
from brook.protocol.frames import RequestHeader
from brook.security.quotas import FETCH as FETCH_QUOTA
from brook.security.quotas import PRODUCE as PRODUCE_QUOTA
from brook.security.quotas import REQUEST as REQUEST_QUOTA

from .context import PRINCIPAL, THROTTLE_MS

__all__ = ["FETCH_QUOTA", "PRODUCE_QUOTA", "REQUEST_QUOTA", "charge"]


def charge(broker: Broker, hdr: RequestHeader, quota: str, value: float) -> int:
    """Count `value` against `quota` for the request's user and client id; the throttle in ms."""
    quotas = broker.quotas
    if not quotas.configs:
        return 0
    user = PRINCIPAL.get().partition(":")[2]
    ms = quotas.record(quota, user, hdr.client_id or "", value, time.monotonic())
    if ms > 0:
        broker.metrics.on_throttle(quota, ms)
        THROTTLE_MS.set(max(THROTTLE_MS.get(), ms))
    return ms
