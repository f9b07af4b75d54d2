"""Host ports for pods that all live on 127.0.0.1.

Every (namespace, pod name, containerPort) gets its own host port, allocated once and kept for the
runner's lifetime, so a restarted StatefulSet pod comes back at the same address (as its stable DNS
name would in a cluster). Ports come from below the kernel's ephemeral range, so outgoing connections
(whose local ports the kernel picks from that range) and other tests' `bind(0)` never take a port a pod
will listen on; each candidate is checked free with a bind on 0.0.0.0 before it is handed out.
"""

from __future__ import annotations

import errno
import random
import socket
import threading
from pathlib import Path


def _ephemeral_low() -> int:
    try:
        low, _high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low)
    except (OSError, ValueError):
        return 32768


def is_free(port: int) -> bool:
    for host in ("0.0.0.0", "127.0.0.1"):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError as e:
                if e.errno in (errno.EADDRINUSE, errno.EACCES):
                    return False
                raise
    return True


class PortAllocator:
    """Thread-safe: the test thread reserves ports (a Cluster's listener port) while the runner runs."""

    def __init__(self, low: int | None = None, high: int | None = None, seed: int | None = None) -> None:
        top = _ephemeral_low()
        self.high = high if high is not None else top - 1
        self.low = low if low is not None else max(1024, self.high - 12_000)
        if self.low >= self.high:
            raise ValueError(f"empty port range {self.low}-{self.high}")
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._taken: set[int] = set()
        self._pods: dict[tuple[str, str, int], int] = {}

    def reserve(self) -> int:
        """A free port nobody else in this runner will be given."""
        with self._lock:
            return self._reserve_locked()

    def _reserve_locked(self) -> int:
        for _ in range(2000):
            port = self._rng.randrange(self.low, self.high + 1)
            if port in self._taken:
                continue
            if is_free(port):
                self._taken.add(port)
                return port
        raise RuntimeError(f"no free port in {self.low}-{self.high}")

    def pod_port(self, namespace: str, pod: str, port: int) -> int:
        key = (namespace, pod, int(port))
        with self._lock:
            found = self._pods.get(key)
            if found is None:
                found = self._pods[key] = self._reserve_locked()
            return found

    def mapping(self) -> dict[tuple[str, str, int], int]:
        with self._lock:
            return dict(self._pods)
