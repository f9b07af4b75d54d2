"""Connection limits with real sockets: max.connections.per.ip (and its overrides), max.connections and
max.connection.creation.rate refuse politely (closed at once, counted, logged once per interval); the
broker keeps serving; and with a small open-file limit it never floods its log with accept errors."""

from __future__ import annotations

import resource
import socket
import time
import urllib.request
from pathlib import Path

from tests.support.broker import BrokerProcess
from tests.support.cluster import eventually
from tests.support.raw import RawClient, api_versions_request


def _open(b: BrokerProcess, n: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", b.port), timeout=10) for _ in range(n)]


def _serves(b: BrokerProcess) -> bool:
    with RawClient(b.bootstrap) as c:
        return bool(c.request(api_versions_request(), 3).api_keys)


def _refused_metric(b: BrokerProcess, limit: str) -> float:
    port = int(b.log_text().split("metrics and health on http://0.0.0.0:")[1].split()[0])
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(f'brook_connections_refused_total{{limit="{limit}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_per_ip_limit_and_override(tmp_path: Path) -> None:
    b = BrokerProcess(
        tmp_path / "data",
        args=["--max-connections-per-ip", "3", "--max-connections-per-ip-overrides", "10.9.9.9:100"],
    ).start()
    try:
        socks = _open(b, 6)
        # Each connection is either answered or closed by the broker: no silence is read as either.
        served = [RawClient(sock=s).served() for s in socks]
        assert served == [True] * 3 + [False] * 3, served
        assert _refused_metric(b, "max.connections.per.ip") == 3
        for s in socks:
            s.close()
        eventually(lambda: _serves(b), 20, "the broker to serve once the connections are gone")
        assert b.log_text().count("refused connections") == 1  # once per interval, not per socket
    finally:
        b.stop()


def test_max_connections_and_creation_rate(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", args=["--max-connections", "4"]).start()
    try:
        socks = _open(b, 8)
        assert [RawClient(sock=s).served() for s in socks] == [True] * 4 + [False] * 4
        for s in socks:
            s.close()
        eventually(lambda: _serves(b), 20, "the broker to serve again")
    finally:
        b.stop()
    r = BrokerProcess(tmp_path / "rate", args=["--max-connection-creation-rate", "5"]).start()
    try:
        time.sleep(1.1)  # a second without connections: the rate window is empty
        socks = _open(r, 12)
        refused = [RawClient(sock=s).served() for s in socks].count(False)
        assert refused >= 5, refused  # 12 within far less than 2 s: at most 10 admitted
        assert _refused_metric(r, "max.connection.creation.rate") == refused
        for s in socks:
            s.close()
    finally:
        r.stop()


def test_a_small_open_file_limit_does_not_flood_the_log(tmp_path: Path) -> None:
    """The broker under 256 open files (hard limit, so it cannot raise it) and 400 connections."""

    def small_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    b = BrokerProcess(tmp_path / "data", preexec_fn=small_limit).start()
    socks: list[socket.socket] = []
    try:
        for _ in range(400):
            try:
                socks.append(socket.create_connection(("127.0.0.1", b.port), timeout=5))
            except OSError:
                break
        time.sleep(2)
        for s in socks:
            s.close()
        eventually(lambda: _serves(b), 30, "the broker to serve after the flood")
        text = b.log_text()
        assert "open files limit 256, max.connections 192" in text
        assert text.count("out of system resource") <= 1
        assert text.count("refused connections") <= 2
    finally:
        b.stop()
