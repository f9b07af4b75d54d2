"""Who acknowledges a partition's writes, and when: one raw Produce at a time sent to each broker.

A client library follows the leader it was told of; a probe does not: it asks every broker, all the
time, to take one record, so a broker that still believes it leads after it was deposed shows by
acknowledging. `window()` is how long two brokers both acknowledged: from the first acknowledgement of
the broker that took over to the last of the one that led before (negative: a gap, none overlapped).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field

from kafka.protocol.producer import ProduceRequest

from .raw import RawClient
from .records import batch


@dataclass
class Ack:
    at: float  # time.monotonic()
    broker: int
    offset: int
    value: bytes


@dataclass
class AckProbe:
    brokers: dict[int, str]  # node id -> bootstrap
    topic: str
    acks: int = -1
    partition: int = 0
    interval: float = 0.02
    acked: list[Ack] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> AckProbe:
        for node, address in self.brokers.items():
            t = threading.Thread(target=self._run, args=(node, address), daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> list[Ack]:
        self._stop.set()
        for t in self._threads:
            t.join(15)
        return sorted(self.acked, key=lambda a: a.at)

    def _run(self, node: int, address: str) -> None:
        P = ProduceRequest
        n = 0
        while not self._stop.is_set():
            try:
                with RawClient(address, timeout=2.0) as c:
                    while not self._stop.is_set():
                        value = f"probe-{node}-{self.acks}-{n}".encode()
                        n += 1
                        req = P(
                            transactional_id=None,
                            acks=self.acks,
                            timeout_ms=1000,
                            topic_data=[P.TopicProduceData(name=self.topic, partition_data=[
                                P.TopicProduceData.PartitionProduceData(
                                    index=self.partition, records=batch([value]))])],
                        )  # fmt: skip
                        r = c.request(req, 7).responses[0].partition_responses[0]
                        if r.error_code == 0:
                            self.acked.append(Ack(time.monotonic(), node, int(r.base_offset), value))
                        time.sleep(self.interval)
            except (OSError, ConnectionError):  # cut off, or a broker restarting: again after a pause
                with contextlib.suppress(Exception):
                    time.sleep(0.1)

    def window(self, old: int, new: int) -> float:
        """Seconds during which both `old` and `new` acknowledged (negative: the gap between them)."""
        last_old = max((a.at for a in self.acked if a.broker == old), default=float("-inf"))
        first_new = min((a.at for a in self.acked if a.broker == new), default=float("inf"))
        return last_old - first_new
