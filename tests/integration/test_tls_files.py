"""TLS files: a renewed server certificate is served without a restart; an expired client certificate
is refused (ssl.client.auth=required)."""

from __future__ import annotations

import datetime
import os
import socket
import ssl
import time
from pathlib import Path

import trustme
from confluent_kafka.admin import AdminClient

from tests.support.broker import BrokerProcess
from tests.support.cluster import eventually
from tests.support.ports import free_port
from tests.support.raw import RawClient


def _handshake(port: int, ctx: ssl.SSLContext) -> bool:
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as sock,
            ctx.wrap_socket(sock, server_hostname="127.0.0.1"),
        ):
            return True
    except (ssl.SSLError, OSError):
        return False


def _refused_after_handshake(port: int, ctx: ssl.SSLContext, wait: float = 10.0) -> bool:
    """TLS 1.3: the server checks the client's certificate after the client's side of the handshake is
    done; its refusal arrives as an alert (or a close) on the first read, not as a timeout."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as sock,
        ctx.wrap_socket(sock, server_hostname="127.0.0.1") as tls,
    ):
        tls.settimeout(wait)
        try:
            return tls.recv(1) == b""
        except ssl.SSLError:
            return True
        except TimeoutError:
            return False


def _served_over_tls(port: int, ctx: ssl.SSLContext) -> bool:
    """Whether the listener answers a request over TLS with this context (a refusal closes it)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        return RawClient(sock=ctx.wrap_socket(sock, server_hostname="127.0.0.1")).served()
    except (ssl.SSLError, OSError):
        return False
    finally:
        sock.close()


def test_renewed_certificate_and_expired_client_certificate(tmp_path: Path) -> None:
    old_ca, new_ca = trustme.CA(), trustme.CA()
    client_ca = trustme.CA()
    pem = tmp_path / "server.pem"
    old_ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pem))
    client_ca.cert_pem.write_to_path(str(tmp_path / "clients.pem"))
    ssl_port = free_port()
    broker = BrokerProcess(tmp_path / "data")
    broker.args = [
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_port}",
        "--ssl-keystore-location",
        str(pem),
        "--ssl-truststore-location",
        str(tmp_path / "clients.pem"),
        "--ssl-client-auth",
        "required",
    ]
    broker.start()
    try:

        def client(ca: trustme.CA, cert: trustme.LeafCert) -> ssl.SSLContext:
            ctx = ssl.create_default_context()
            ca.configure_trust(ctx)
            cert.configure_cert(ctx)
            return ctx

        good = client_ca.issue_cert("alice")
        expired = client_ca.issue_cert(
            "mallory", not_after=datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
        )
        assert _handshake(ssl_port, client(old_ca, good))
        assert _refused_after_handshake(ssl_port, client(old_ca, expired))
        assert not _handshake(ssl_port, client(new_ca, good))

        new_ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pem))
        os.utime(pem, ns=(os.stat(pem).st_atime_ns, os.stat(pem).st_mtime_ns + 2_000_000_000))
        eventually(lambda: _handshake(ssl_port, client(new_ca, good)), 20, "the renewed certificate")
        assert not _handshake(ssl_port, client(old_ca, good))
        AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=20)  # unharmed
    finally:
        broker.stop()


def test_listener_requiring_client_certificates_and_advertised_listeners_file(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ssl_port, mtls_port = free_port(), free_port()
    broker = BrokerProcess(tmp_path / "data")
    (tmp_path / "advertised").write_text(f"PLAINTEXT://localhost:{broker.port}\n")
    broker.args = [
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_port},MTLS://127.0.0.1:{mtls_port}",
        "--listener-security-protocol-map",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "--advertised-listeners-file",
        str(tmp_path / "advertised"),
        "--ssl-keystore-location",
        str(tmp_path / "server.pem"),
        "--ssl-truststore-location",
        str(tmp_path / "ca.pem"),
        "--ssl-client-auth-listeners",
        "MTLS",
    ]
    broker.start()
    try:
        anonymous = ssl.create_default_context()
        ca.configure_trust(anonymous)
        with_cert = ssl.create_default_context()
        ca.configure_trust(with_cert)
        ca.issue_cert("broker-1").configure_cert(with_cert)
        assert _served_over_tls(ssl_port, anonymous)  # --ssl-client-auth none
        assert _refused_after_handshake(mtls_port, anonymous)
        assert _served_over_tls(mtls_port, with_cert)
        md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=20)
        assert [(b.host, b.port) for b in md.brokers.values()] == [("localhost", broker.port)]
    finally:
        broker.stop()


def test_stop_does_not_wait_for_an_idle_tls_client(tmp_path: Path) -> None:
    """A TLS client that holds its connection without reading (a Java consumer between polls) never
    answers the server's close_notify; asyncio would wait 30 s for it. SIGTERM stops the broker at once,
    as Kafka's shutdown closes its sockets outright."""
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    tls_port = free_port()
    b = BrokerProcess(tmp_path / "data")
    b.args = [
        *("--listeners", f"PLAINTEXT://127.0.0.1:{b.port},SSL://127.0.0.1:{tls_port}"),
        *("--ssl-keystore-location", str(tmp_path / "server.pem")),
    ]
    b.start()
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    try:
        with (
            socket.create_connection(("127.0.0.1", tls_port), timeout=10) as sock,
            ctx.wrap_socket(sock, server_hostname="127.0.0.1"),
        ):
            t = time.monotonic()
            assert b.stop(timeout=60) == 0
            took = time.monotonic() - t
    finally:
        b.kill()
    assert took < 10, f"the broker took {took:.1f} s to stop"
