"""A confluent-kafka ShareConsumer (KIP-932) in its own process, so a test can kill it (-9).

Run as `python -m tests.support.share_worker BOOTSTRAP GROUP TOPIC MODE` with MODE:
- `work`: explicit acknowledgement; every record is accepted, except one whose value is b"poison",
  which is released (so it is redelivered until the delivery count limit archives it). After each
  poll it commits synchronously and prints {"acked": [[partition, offset, delivery_count], ...]} for
  the records of the partitions whose commit succeeded, and {"poison": delivery_count} per poison
  record it saw. SIGTERM closes the consumer.
- `hold`: polls until it gets records, prints {"holding": [[partition, offset], ...]} and then holds
  them without acknowledging (until killed).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Any


def say(obj: object) -> None:
    print(json.dumps(obj), flush=True)


def main() -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer

    bootstrap, group, topic, mode = sys.argv[1:5]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    c = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    c.subscribe([topic])
    if mode == "hold":
        while True:
            got = [m for m in c.poll(1.0) if m.error() is None]
            if got:
                say({"holding": [[m.partition(), m.offset()] for m in got]})
                while True:
                    time.sleep(60)
    while not stop.is_set():
        msgs: list[Any] = [m for m in c.poll(0.5) if m.error() is None]
        if not msgs:
            continue
        done: dict[int, list[list[int]]] = {}
        for m in msgs:
            if m.value() == b"poison":
                c.acknowledge(m, AcknowledgeType.RELEASE)
                say({"poison": m.delivery_count()})
                continue
            c.acknowledge(m, AcknowledgeType.ACCEPT)
            p = int(m.partition())
            done.setdefault(p, []).append([p, int(m.offset()), int(m.delivery_count())])
        results: dict[Any, Any] = c.commit_sync(30) or {}
        ok = {tp.partition for tp, err in results.items() if err is None}
        acked = [rec for p, recs in done.items() if p in ok for rec in recs]
        failed = [p for p in done if p not in ok]
        if acked:
            say({"acked": acked})
        if failed:
            say({"commit_failed": failed})
    c.close()


if __name__ == "__main__":
    main()
