"""The schema registry on a 3-broker cluster: every broker serves it from its own copy of `_schemas`,
writes on any of them get unique ids (one transactional writer at a time), a write shows on the other
brokers within a bounded time, and killing the broker that holds the writer role (-9, mid-storm) loses
nothing that was acknowledged and never reuses an id."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster, eventually, running
from tests.support.ports import free_port
from tests.support.registry import call, registry_args, wait_serving

pytestmark = [pytest.mark.slow, pytest.mark.needs_cluster]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Cluster, dict[int, str]]]:
    ports = {i: free_port() for i in range(3)}
    urls = {i: registry_args(ports[i])[1] for i in range(3)}
    c = Cluster(tmp_path, node_args=lambda i: registry_args(ports[i])[0])
    for c_ in running(c):
        for url in urls.values():
            wait_serving(url, 120)
        yield c_, urls


def schema(tag: str) -> str:
    return json.dumps({"type": "record", "name": f"R{tag}", "fields": [{"name": "a", "type": "int"}]})


def register(url: str, subject: str) -> int | None:
    """The id given, or None when the request failed (e.g. its broker was killed)."""
    try:
        status, body = call(
            f"{url}/subjects/{subject}/versions", "POST", {"schema": schema(subject)}, timeout=60
        )
    except OSError:
        return None
    assert status == 200 or status >= 500, body  # never a client error for a valid registration
    return int(body["id"]) if status == 200 else None


def test_writes_on_every_broker_get_unique_ids_and_show_everywhere(
    cluster: tuple[Cluster, dict[int, str]],
) -> None:
    _, urls = cluster
    ids: dict[str, int] = {}
    lags: list[float] = []
    for i in range(9):  # the writer role moves at every write: each fences the previous
        subject = f"move-{i}"
        got = register(urls[i % 3], subject)
        assert got is not None
        ids[subject] = got
        started = time.monotonic()
        for other in (urls[(i + 1) % 3], urls[(i + 2) % 3]):
            while call(f"{other}/subjects/{subject}/versions")[0] != 200:
                assert time.monotonic() - started < 10, f"{subject} not on {other} after 10 s"
                time.sleep(0.005)
        lags.append(time.monotonic() - started)
    assert len(set(ids.values())) == len(ids)
    print(
        f"visible on the two other brokers after: max {max(lags) * 1000:.0f} ms, "
        f"median {sorted(lags)[len(lags) // 2] * 1000:.0f} ms"
    )
    assert max(lags) < 2.0


def test_killing_the_writer_loses_nothing_and_reuses_no_id(cluster: tuple[Cluster, dict[int, str]]) -> None:
    c, urls = cluster
    acked: dict[str, int] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def storm(node: int) -> None:
        n = 0
        while not stop.is_set():
            subject = f"storm-{node}-{n}-{uuid.uuid4().hex[:4]}"
            got = register(urls[node], subject)
            if got is not None:
                with lock:
                    acked[subject] = got
            n += 1

    threads = [threading.Thread(target=storm, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    eventually(lambda: sum(s.startswith("storm-0-") for s in list(acked)) >= 5, 60, "writes through broker 0")
    c.broker(0).kill()  # mid-storm: broker 0 is writing (or about to) when it dies
    killed_at = len(acked)
    eventually(lambda: len(acked) >= killed_at + 10, 90, "writes after the kill")
    stop.set()
    for t in threads:
        t.join(90)
    ids = list(acked.values())
    assert len(set(ids)) == len(ids), "an id was handed out twice"
    for url in (urls[1], urls[2]):

        def all_there(u: str = url) -> bool:
            status, body = call(f"{u}/schemas?subjectPrefix=storm-")
            # A superset: a write whose answer died with broker 0 may have been committed.
            return status == 200 and acked.items() <= {v["subject"]: v["id"] for v in body}.items()

        eventually(all_there, 20, "every acknowledged schema on the survivors")
        _, body = call(f"{url}/schemas?subjectPrefix=storm-")
        listed = [v["id"] for v in body]
        assert len(set(listed)) == len(listed), "two subjects hold one id"
    print(f"{len(acked)} schemas acknowledged, {killed_at} before the kill")
