"""ssl.enabled.protocols: a broker limited to TLS 1.3 (from its server.properties, as a Kafka user
writes it) refuses a client that speaks only TLS 1.2, which a broker with the default list serves; a
protocol Brook cannot serve stops `brook broker` with one line."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
from pathlib import Path

import trustme

from tests.support.broker import BrokerProcess
from tests.support.ports import free_port
from tests.support.raw import RawClient


def _client(ca: trustme.CA, version: ssl.TLSVersion) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    ctx.minimum_version = ctx.maximum_version = version
    return ctx


def _served(port: int, ctx: ssl.SSLContext) -> bool:
    """Whether the listener answers ApiVersions over TLS with this context; a refused handshake is an
    SSLError here (TLS 1.2 ends the handshake with the server's protocol_version alert)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        return RawClient(sock=ctx.wrap_socket(sock, server_hostname="127.0.0.1")).served()
    except ssl.SSLError:
        return False
    finally:
        sock.close()


def _broker(tmp_path: Path, ca: trustme.CA, properties: str) -> tuple[BrokerProcess, int]:
    tmp_path.mkdir()
    pem = tmp_path / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pem))
    (tmp_path / "server.properties").write_text(properties)
    ssl_port = free_port()
    broker = BrokerProcess(tmp_path / "data")
    broker.args = [
        "--config",
        str(tmp_path / "server.properties"),
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_port}",
        "--ssl-keystore-location",
        str(pem),
    ]
    return broker.start(), ssl_port


def test_a_broker_limited_to_tls_1_3_refuses_tls_1_2(tmp_path: Path) -> None:
    ca = trustme.CA()
    broker, port = _broker(tmp_path / "limited", ca, "ssl.enabled.protocols=TLSv1.3\n")
    try:
        assert _served(port, _client(ca, ssl.TLSVersion.TLSv1_3))
        assert not _served(port, _client(ca, ssl.TLSVersion.TLSv1_2))
    finally:
        broker.stop()
    # The same client against the default list (TLSv1.2,TLSv1.3): served, so the refusal above is the
    # setting's.
    broker, port = _broker(tmp_path / "default", ca, "")
    try:
        assert _served(port, _client(ca, ssl.TLSVersion.TLSv1_2))
    finally:
        broker.stop()


def test_a_protocol_brook_cannot_serve_is_one_line(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "brook.cli", "broker", "--data-dir", str(tmp_path)]
    cmd += ["--port", str(free_port()), "--ssl-enabled-protocols", "TLSv1.2,SSLv3"]
    r = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "SSLv3" in lines[0] and "TLSv1.2 and TLSv1.3" in lines[0], r.stderr
