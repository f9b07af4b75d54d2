"""Generate page views into the page-views topic (for the example pipeline and its test).

    python generate_page_views.py --bootstrap HOST:PORT [--topic page-views] [--count N] [--seed S]

Returns (in `generate`) the expected count per (page, window start), so a test can check the pipeline.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter

PAGES = ["/", "/home", "/pricing", "/docs", "/blog/brook", "/signup"]


def generate(
    bootstrap: str,
    topic: str = "page-views",
    count: int = 10_000,
    seed: int = 1,
    start_ms: int | None = None,
    span_ms: int = 5 * 60_000,
    window_ms: int = 60_000,
) -> Counter[tuple[str, int]]:
    """Produce `count` views with event times in [start_ms, start_ms + span_ms); answer the expected
    counts per (page, window start ms)."""
    from confluent_kafka import Producer

    rng = random.Random(seed)
    start = start_ms if start_ms is not None else (int(time.time() * 1000) // window_ms) * window_ms - span_ms
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10, "enable.idempotence": True})
    expected: Counter[tuple[str, int]] = Counter()
    for i in range(count):
        page = rng.choice(PAGES)
        ts = start + rng.randrange(span_ms)
        user = f"u{rng.randrange(500)}"
        value = json.dumps({"page": page, "user": user, "ts": ts}).encode()
        while True:
            try:
                producer.produce(topic, key=user.encode(), value=value, timestamp=ts)
                break
            except BufferError:
                producer.poll(0.05)
        expected[(page, ts - ts % window_ms)] += 1
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("page views not acknowledged")
    return expected


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", default="page-views")
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    expected = generate(a.bootstrap, a.topic, a.count, a.seed)
    print(f"produced {sum(expected.values())} page views in {len(expected)} (page, window) cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
