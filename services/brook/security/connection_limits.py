"""Kafka's connection limits: max.connections, max.connections.per.ip (with overrides) and
max.connection.creation.rate. A connection over a limit is closed as soon as it is accepted (Kafka closes
it too), counted in `brook_connections_refused`, and logged once per interval, never once per socket.

The broker also raises its open-file limit to the hard limit at start-up and, unless told otherwise,
keeps max.connections a quarter below it, so sockets never exhaust the descriptors the logs need (and
asyncio never floods the log with `socket.accept() out of system resource`). A dedicated inter-broker
listener is exempt from max.connections and the creation rate, as replication must go on.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

UNLIMITED = 2**31 - 1
_LOG_INTERVAL_S = 10.0


@dataclass(slots=True)
class ConnectionLimitSettings:
    max_connections: int = -1  # max.connections; -1: three quarters of the open-file limit
    max_connections_per_ip: int = UNLIMITED  # max.connections.per.ip
    per_ip_overrides: dict[str, int] = field(default_factory=dict)  # max.connections.per.ip.overrides
    max_creation_rate: int = UNLIMITED  # max.connection.creation.rate, per second


def parse_overrides(value: str) -> dict[str, int]:
    """Kafka's "host:count,host:count"."""
    out: dict[str, int] = {}
    for item in (i.strip() for i in value.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.isdigit():
            raise ValueError(f"'{item}' is not host:count")
        out[host] = int(count)
    return out


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit where allowed; the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, e)
    return soft


class ConnectionLimiter:
    def __init__(self, settings: ConnectionLimitSettings, open_files: int, on_refused: Callable[[str], None]):
        self.settings = settings
        self.max_connections = (
            settings.max_connections if settings.max_connections >= 0 else max(open_files * 3 // 4, 16)
        )
        self._on_refused = on_refused
        self.count = 0
        self._per_ip: dict[str, int] = {}
        self._created: deque[float] = deque()  # accept times within the last second
        self._refused_since_log: dict[str, int] = {}
        self._logged = 0.0

    def admit(self, ip: str, exempt: bool) -> bool:
        """Count a new connection from `ip`, or refuse it (the caller closes it)."""
        s = self.settings
        now = time.monotonic()
        reason = None
        limit_ip = s.per_ip_overrides.get(ip, s.max_connections_per_ip)
        if self._per_ip.get(ip, 0) >= limit_ip:
            reason = "max.connections.per.ip"
        elif not exempt and self.count >= self.max_connections:
            reason = "max.connections"
        elif not exempt and s.max_creation_rate < UNLIMITED:
            while self._created and now - self._created[0] >= 1.0:
                self._created.popleft()
            if len(self._created) >= s.max_creation_rate:
                reason = "max.connection.creation.rate"
            else:
                self._created.append(now)
        if reason is not None:
            self._refused(reason, now)
            return False
        self.count += 1
        self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        return True

    def release(self, ip: str) -> None:
        self.count -= 1
        n = self._per_ip.get(ip, 0) - 1
        if n > 0:
            self._per_ip[ip] = n
        else:
            self._per_ip.pop(ip, None)

    def _refused(self, reason: str, now: float) -> None:
        self._on_refused(reason)
        self._refused_since_log[reason] = self._refused_since_log.get(reason, 0) + 1
        if now - self._logged >= _LOG_INTERVAL_S:
            counts = ", ".join(f"{n} by {r}" for r, n in sorted(self._refused_since_log.items()))
            log.warning(
                "refused connections (%s; %d open, max.connections %d)",
                counts,
                self.count,
                self.max_connections,
            )
            self._refused_since_log = {}
            self._logged = now


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """asyncio reports every failed accept (EMFILE ...) through the loop's exception handler: one log line
    per interval instead of thousands per second."""
    last = [0.0]
    skipped = [0]

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if "socket.accept() out of system resource" in str(context.get("message", "")):
            now = time.monotonic()
            if now - last[0] < _LOG_INTERVAL_S:
                skipped[0] += 1
                return
            log.error(
                "accepting connections failed: %s (%d more like it since the last report)",
                context.get("exception"),
                skipped[0],
            )
            last[0], skipped[0] = now, 0
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
