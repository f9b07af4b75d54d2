"""A confluent-kafka group consumer in its own process, so a test can kill -9 it.

Run as `python -m tests.support.group_member BOOTSTRAP GROUP TOPIC [ASSIGNOR]`; it prints one JSON
line per assignment change ({"assigned": [...]}) and per record ({"rec": [partition, offset, value]}).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any


def main() -> None:
    from confluent_kafka import Consumer

    bootstrap, group, topic = sys.argv[1:4]
    assignor = sys.argv[4] if len(sys.argv) > 4 else "range"
    owned: set[int] = set()

    def say(obj: object) -> None:
        print(json.dumps(obj), flush=True)

    def on_assign(c: Any, parts: list[Any]) -> None:
        owned.update(p.partition for p in parts)
        say({"assigned": sorted(owned), "added": sorted(p.partition for p in parts)})

    def on_revoke(c: Any, parts: list[Any]) -> None:
        owned.difference_update(p.partition for p in parts)
        say({"assigned": sorted(owned), "revoked": sorted(p.partition for p in parts)})

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": assignor,
            "fetch.queue.backoff.ms": 10,
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
        }
    )
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    while True:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            say({"rec": [m.partition(), m.offset(), (m.value() or b"").decode()]})


class GroupMember:
    """The test side: starts the process and follows its output."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str = "range") -> None:
        self.assigned: set[int] = set()
        self.assignments = 0  # rebalance callbacks that assigned (maybe nothing): 0 before its first join
        self.revoked: list[list[int]] = []
        self.records: list[tuple[int, int, str]] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.group_member", bootstrap, group, topic, assignor],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "assigned" in msg:
                self.assigned = set(msg["assigned"])
                if "added" in msg:
                    self.assignments += 1
                if "revoked" in msg:
                    self.revoked.append(msg["revoked"])
            elif "rec" in msg:
                p, o, v = msg["rec"]
                self.records.append((p, o, v))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def wait_for(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


if __name__ == "__main__":
    main()
