"""What a connection may make the broker hold: little while idle, a bounded amount however fast a
client sends (reading pauses past 64 requests or 16 MiB read and not yet started)."""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import time
from pathlib import Path

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from tests.integration.test_clients import create_topic
from tests.support.broker import BrokerProcess
from tests.support.raw import RawClient, api_versions_request, fetch_request
from tests.support.wire_fuzz import rss_mb

pytestmark = pytest.mark.slow


def test_idle_connections_hold_little_memory(tmp_path: Path) -> None:
    """400 connections that each asked one thing and stay: ~3 MB of the broker's RSS (a 64 KiB receive
    buffer each would be ~27 MB; max.connections' 15,000 would pin ~1 GB)."""
    b = BrokerProcess(tmp_path / "data").start()
    clients: list[RawClient] = []
    try:
        assert b.proc is not None
        with RawClient(b.bootstrap) as warm:  # the first request's one-off allocations, before measuring
            warm.request(api_versions_request(), 3)
        before = rss_mb(b.proc.pid)
        for _ in range(400):
            clients.append(RawClient(b.bootstrap))
            assert clients[-1].request(api_versions_request(), 3).error_code == 0
        grown = rss_mb(b.proc.pid) - before
        assert grown < 12, f"{grown:.1f} MB for 400 idle connections"
    finally:
        for c in clients:
            c.close()
        b.stop()


def test_a_fast_client_is_read_no_further_than_the_queue_bound(tmp_path: Path) -> None:
    """A long-polling Fetch holds the connection's turn (requests are answered in order); 60 requests of
    1 MiB sent behind it are read up to the 16 MiB bound, then the broker stops reading (TCP pushes back)
    until the Fetch is answered; then every one of them is answered."""
    b = BrokerProcess(tmp_path / "data").start()
    try:
        create_topic(b.bootstrap, "waits", partitions=1)
        with RawClient(b.bootstrap) as c:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)  # little kept client-side
            c.request(api_versions_request(), 3)  # the connection is served
            fetch = fetch_request("waits", max_wait_ms=6000, min_bytes=1)
            fetch.with_header(correlation_id=1, client_id="fast")
            c.send_frame(fetch.encode(version=11, header=True))
            # ApiVersions v0 with 1 MiB after its (empty) body: trailing bytes are ignored, as by Kafka.
            req = ApiVersionsRequest()
            req.with_header(correlation_id=2, client_id="fast")
            big = req.encode(version=0, header=True) + b"\0" * (1 << 20)
            data = b"".join(struct.pack(">i", len(big)) + big for _ in range(60))
            c.sock.setblocking(False)
            sent, deadline = 0, time.monotonic() + 3
            while sent < len(data) and time.monotonic() < deadline:
                if select.select([], [c.sock], [], 0.2)[1]:
                    with contextlib.suppress(BlockingIOError):
                        sent += c.sock.send(data[sent : sent + 65536])
            # Accepted: the 16 MiB bound, the frame in progress, and both sides' socket buffers.
            assert sent < 40 << 20, f"{sent >> 20} MiB of 60 read while a Fetch waits"
            c.sock.setblocking(True)
            c.sock.settimeout(30)
            c.sock.sendall(data[sent:])
            assert len(c.read_frame()) > 0  # the Fetch, at its max wait
            for _ in range(60):
                c.read_frame()  # each ApiVersions answered once reading resumed
    finally:
        b.stop()
