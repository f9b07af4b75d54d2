"""A confluent-kafka consumer of the consumer group protocol (KIP-848, `group.protocol=consumer`) in
its own process, so a test can stop (SIGSTOP) or kill it.

Run as `python -m tests.support.consumer_member BOOTSTRAP GROUP TOPIC [INSTANCE_ID] [ASSIGNOR]
[PROTOCOL]` (PROTOCOL `classic` for a consumer of the classic protocol, eager `range`); it
commits each record synchronously before reading the next, and prints one JSON line per assignment
change ({"assigned": [...]}), per partition lost without a revocation (fenced: {"lost": [...]}) and
per record ({"rec": [partition, offset]}). It closes the consumer (leaving the group) on SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any


def main() -> None:
    from confluent_kafka import Consumer

    bootstrap, group, topic = sys.argv[1:4]
    instance = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None
    assignor = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None
    protocol = sys.argv[6] if len(sys.argv) > 6 else "consumer"
    owned: set[int] = set()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def say(obj: object) -> None:
        print(json.dumps(obj), flush=True)

    def on_assign(c: Any, parts: list[Any]) -> None:
        owned.update(p.partition for p in parts)
        say({"assigned": sorted(owned)})

    def on_revoke(c: Any, parts: list[Any]) -> None:
        owned.difference_update(p.partition for p in parts)
        say({"assigned": sorted(owned)})

    def on_lost(c: Any, parts: list[Any]) -> None:
        say({"lost": sorted(p.partition for p in parts)})
        on_revoke(c, parts)

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 10,
    }
    if os.environ.get("CONSUMER_MEMBER_DEBUG"):  # librdkafka's debug contexts, to stderr
        conf["debug"] = os.environ["CONSUMER_MEMBER_DEBUG"]
    if instance:
        conf["group.instance.id"] = instance
    if assignor:
        conf["group.remote.assignor"] = assignor
    c = Consumer(conf)
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    while not stop.is_set():
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            commit(c, m)
            say({"rec": [m.partition(), m.offset()]})
    c.close()
    say({"closed": True})


def commit(c: Any, m: Any) -> None:
    """Commit synchronously; a commit racing the heartbeat that moved the member's epoch fails with
    STALE_MEMBER_EPOCH and is retried with the new epoch, and one that meets a coordinator going
    away is retried until the next one answers, as Kafka's own consumer's commitSync does."""
    from confluent_kafka import KafkaError, KafkaException

    again = {
        KafkaError.STALE_MEMBER_EPOCH,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._WAIT_COORD,
    }
    for _ in range(600):
        try:
            c.commit(message=m, asynchronous=False)
            return
        except KafkaException as e:
            if e.args[0].code() not in again:
                raise
            time.sleep(0.05)
    raise RuntimeError("the commit kept failing")


class ConsumerMember:
    """The test side: starts the process and follows its output."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        instance: str | None = None,
        assignor: str = "",
        protocol: str = "consumer",
    ) -> None:
        self.assigned: set[int] = set()
        self.records: list[tuple[int, int]] = []
        self.lost: list[list[int]] = []
        self.closed = False
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.consumer_member",
                bootstrap,
                group,
                topic,
                instance or "",
                assignor,
                protocol,
            ],
            stdout=subprocess.PIPE,
            stderr=open(os.environ.get("CONSUMER_MEMBER_STDERR", os.devnull), "a"),  # noqa: SIM115
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
            elif "lost" in msg:
                self.lost.append(msg["lost"])
            elif "rec" in msg:
                p, o = msg["rec"]
                self.records.append((p, o))
            elif "closed" in msg:
                self.closed = True

    def close(self, timeout: float = 30) -> None:
        """Leave the group as the application would (Consumer.close)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout)
        self._reader.join(5)
        self.assigned = set()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.assigned = set()


if __name__ == "__main__":
    main()
