"""Free loopback ports for servers under test.

A port the kernel hands out for port 0 comes from its ephemeral range, the same range it takes the
source ports of outgoing connections from: between our releasing it and the server binding it, a
client's connection (on a busy machine, with hundreds of them) can take it, and the server fails
with "address in use". So ports come from below that range, where only a server binding it on
purpose can be, are checked free, and are never handed out twice in one process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_LOWEST = 10000
_given: set[int] = set()


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    top = _ephemeral_start()
    if top - _LOWEST >= 1000:
        for _ in range(200):
            port = random.randrange(_LOWEST, top)
            if port not in _given and _bindable(port):
                _given.add(port)
                return port
    with socket.socket() as s:  # no room below the ephemeral range: the kernel's choice
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    _given.add(port)
    return port
