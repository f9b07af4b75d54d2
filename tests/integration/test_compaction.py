"""A compacted topic written by kcat keeps only the latest value per key once cleaned."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.test_clients import create_topic
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.slow


def kcat_values(bootstrap: str, topic: str) -> list[tuple[str, str]]:
    out = subprocess.run(
        ["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k\t%s\n"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [tuple(line.split("\t", 1)) for line in out.splitlines() if line]  # type: ignore[misc]


def test_kcat_compacted_topic_keeps_latest_per_key(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", args=["--log-cleaner-backoff-ms", "200"]).start()
    try:
        create_topic(
            b.bootstrap,
            "compacted",
            1,
            {"cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01"},
        )
        lines = [f"key-{i % 10}\tvalue-{i}" for i in range(300)]
        # Filler with unique keys rolls the segments holding the last values, so they become cleanable.
        lines += [f"filler-{i}\t{'x' * 900}" for i in range(3)]
        subprocess.run(
            [
                "kcat",
                "-b",
                b.bootstrap,
                "-P",
                "-t",
                "compacted",
                "-K",
                "\t",
                "-X",
                "linger.ms=0",
                "-X",
                "batch.num.messages=1",
            ],
            input="\n".join(lines) + "\n",
            text=True,
            check=True,
            timeout=60,
        )
        latest = {f"key-{k}": f"value-{290 + k}" for k in range(10)}
        deadline = time.monotonic() + 30
        rows = kcat_values(b.bootstrap, "compacted")
        while time.monotonic() < deadline and len([r for r in rows if r[0].startswith("key-")]) > 10:
            time.sleep(0.5)
            rows = kcat_values(b.bootstrap, "compacted")
        keyed = [(k, v) for k, v in rows if k.startswith("key-")]
        assert dict(keyed) == latest
        assert len(keyed) == 10  # one record per key: the newest
        b.stop()  # and it stays so after a restart
        b.start()
        assert [(k, v) for k, v in kcat_values(b.bootstrap, "compacted") if k.startswith("key-")] == keyed
    finally:
        b.stop()
