"""Malformed frames (tests/support/wire_fuzz.py) against a broker with a plain and a SASL listener: it
stays up, serves a well-behaved client throughout, logs no ERROR (an exception other than a refusal
of the request: a handler or decoder bug), and its memory comes back down to a bound.

A short run of what scripts/fuzz does with a million frames on three brokers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess
from tests.support.ports import free_port
from tests.support.wire_fuzz import errors_logged, run

pytestmark = pytest.mark.slow

FRAMES = 30_000


def test_malformed_frames_leave_the_broker_serving(tmp_path: Path) -> None:
    sasl_port = free_port()
    b = BrokerProcess(tmp_path / "data")
    b.args = [
        *("--listeners", f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"),
        *("--sasl-enabled-mechanisms", "SCRAM-SHA-512,PLAIN"),
    ]
    b.start()
    try:
        assert b.proc is not None
        report = asyncio.run(
            run([b.bootstrap, f"127.0.0.1:{sasl_port}"], FRAMES, [b.proc.pid], seed=7, check_every=3_000)
        )
        assert b.proc.poll() is None, "the broker died"
        assert report.frames >= FRAMES and report.checks >= 10
        assert report.unserved == [], report.unserved
        assert errors_logged(b.log_text()) == []
        before, _peak, after = report.rss_mb[str(b.proc.pid)]
        assert after < before + 100, report.rss_mb  # 32 connections at a time: ~+25 MB measured
    finally:
        b.stop()
