"""The registry's state is the `_schemas` topic: a broker restarted reads back versions, ids, soft
deletes, compatibility levels and modes, and hands out the next id after the largest one read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess
from tests.support.ports import free_port
from tests.support.registry import call, registry_args, wait_serving

pytestmark = pytest.mark.slow


def schema(name: str, *fields: str) -> dict[str, str]:
    return {
        "schema": json.dumps(
            {
                "type": "record",
                "name": name,
                "fields": [{"name": f, "type": "int", "default": 0} for f in fields],
            }
        )
    }


def test_a_restarted_broker_serves_what_it_served(tmp_path: Path) -> None:
    args, url = registry_args()
    port = free_port()
    b = BrokerProcess(tmp_path / "data", port=port, args=args).start()
    try:
        wait_serving(url)
        ids = [call(f"{url}/subjects/a/versions", "POST", schema("A", *"xyz"[:n]))[1]["id"] for n in range(3)]
        call(f"{url}/subjects/b/versions", "POST", schema("B", "q"))
        call(f"{url}/subjects/a/versions/2", "DELETE")
        call(f"{url}/subjects/b", "DELETE")
        call(f"{url}/config/a", "PUT", {"compatibility": "FULL_TRANSITIVE"})
        call(f"{url}/mode", "PUT", {"mode": "READWRITE"})
        before = {
            path: call(f"{url}{path}")
            for path in (
                "/subjects",
                "/subjects?deleted=true",
                "/subjects/a/versions",
                "/subjects/a/versions?deleted=true",
                "/subjects/a/versions/latest",
                "/config/a",
                "/mode",
                f"/schemas/ids/{ids[1]}",
            )
        }
    finally:
        b.stop()
    b = BrokerProcess(tmp_path / "data", port=port, args=args).start()
    try:
        wait_serving(url)
        after = {path: call(f"{url}{path}") for path in before}
        assert after == before
        assert before["/subjects/a/versions"] == (200, [1, 3])
        fresh = call(f"{url}/subjects/c/versions", "POST", schema("C", "w"))[1]["id"]
        assert fresh == max(ids) + 2  # b's schema took max(ids) + 1
    finally:
        b.stop()
