#!/usr/bin/env python
"""The schema registry on one broker: registrations per second (each a transaction on `_schemas`) and
lookups per second (GET /schemas/ids/{id}, what deserializers ask on a cache miss, and POST
/subjects/{s} lookups, what serializers ask at start-up), from concurrent HTTP clients (figures printed,
not a test).

    .venv/bin/python bench/registry_bench.py [--schemas 200] [--seconds 10] [--clients 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "services")]

import aiohttp  # noqa: E402
from tests.support.broker import BrokerProcess  # noqa: E402
from tests.support.registry import CONTENT_TYPE, registry_args, wait_serving  # noqa: E402


def schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"Bench{i}", "fields": [{"name": "a", "type": "int"}]})


async def hammer(request: Callable[[int], Any], seconds: float, clients: int) -> float:
    """Requests per second from `clients` concurrent loops, each sending request(n) in turn."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def client(k: int) -> None:
        nonlocal done
        n = k
        while time.perf_counter() < deadline:
            async with request(n) as r:
                assert r.status == 200, await r.text()
                await r.read()
            done += 1
            n += clients

    t0 = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    return done / (time.perf_counter() - t0)


async def run(url: str, schemas: int, seconds: float, clients: int) -> None:
    headers = {"Content-Type": CONTENT_TYPE}
    async with aiohttp.ClientSession(headers=headers) as http:
        started = time.perf_counter()
        ids = []
        for i in range(schemas):  # one at a time: a deploy's serializers registering in turn
            async with http.post(f"{url}/subjects/bench-{i}/versions", json={"schema": schema(i)}) as r:
                ids.append((await r.json())["id"])
        took = time.perf_counter() - started
        print(f"registrations: {schemas / took:.0f}/s sequential ({took / schemas * 1000:.1f} ms each)")

        for name, request in (
            ("GET /schemas/ids/{id}", lambda n: http.get(f"{url}/schemas/ids/{ids[n % len(ids)]}")),
            (
                "POST /subjects/{s} (lookup)",
                lambda n: http.post(
                    f"{url}/subjects/bench-{n % schemas}", json={"schema": schema(n % schemas)}
                ),
            ),
        ):
            rate = await hammer(request, seconds, clients)
            print(f"{name}: {rate:.0f}/s ({clients} clients)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=32)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        args, url = registry_args()
        broker = BrokerProcess(Path(tmp) / "data", args=args).start()
        try:
            wait_serving(url)
            asyncio.run(run(url, a.schemas, a.seconds, a.clients))
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
