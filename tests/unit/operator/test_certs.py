"""The operator's certificates: they verify with Python's ssl as a client would, and renew in time."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import threading
from pathlib import Path

from brook_operator import certs

NOW = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)


def _handshake(tmp_path: Path, ca: certs.KeyPair, leaf: certs.KeyPair, host: str) -> None:
    """A real TLS handshake on 127.0.0.1: the server presents `leaf`, the client checks it against `ca`
    for `host` (the certificate dates are checked against the real clock, so NOW must be near it)."""
    (tmp_path / "leaf.pem").write_bytes(leaf.cert_pem + leaf.key_pem)
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "leaf.pem")
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
        errors: list[BaseException] = []

        def serve() -> None:
            conn, _ = srv.accept()
            try:
                with server.wrap_socket(conn, server_side=True) as s:
                    s.recv(1)
            except (ssl.SSLError, OSError) as e:
                errors.append(e)

        t = threading.Thread(target=serve)
        t.start()
        try:
            with (
                socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
                client.wrap_socket(raw, server_hostname=host) as s,
            ):
                s.sendall(b"x")
        finally:
            t.join(10)


def test_a_broker_certificate_verifies_for_its_hosts(tmp_path: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    ca = certs.new_ca("brook cluster CA", now)
    leaf = certs.issue(ca, "demo-broker", now, hosts=["*.demo-brokers.kafka.svc", "127.0.0.1"])
    assert certs.signed_by(leaf.cert_pem, ca.cert_pem)
    assert certs.hosts_of(leaf.cert_pem) == {"*.demo-brokers.kafka.svc", "127.0.0.1"}
    _handshake(tmp_path, ca, leaf, "127.0.0.1")
    other = certs.new_ca("another CA", now)
    try:
        _handshake(tmp_path, other, leaf, "127.0.0.1")
    except ssl.SSLCertVerificationError:
        pass
    else:
        raise AssertionError("a certificate of another CA was accepted")


def test_renewal_window_and_what_makes_a_leaf_stale() -> None:
    ca = certs.new_ca("ca", NOW)
    leaf = certs.issue(ca, "b", NOW, hosts=["a.svc"], validity_days=90)
    assert certs.leaf_is_current(leaf, ca, NOW, hosts=["a.svc"], renew_before_days=30)
    assert not certs.leaf_is_current(
        leaf, ca, NOW + dt.timedelta(days=61), hosts=["a.svc"], renew_before_days=30
    )
    assert not certs.leaf_is_current(leaf, ca, NOW, hosts=["a.svc", "b.svc"])  # a new host
    assert not certs.leaf_is_current(leaf, certs.new_ca("ca", NOW), NOW, hosts=["a.svc"])  # another key
    assert not certs.leaf_is_current(None, ca, NOW)


def test_a_renewed_ca_keeps_old_leaves_valid_and_caps_new_ones() -> None:
    ca = certs.new_ca("ca", NOW, validity_days=100)
    leaf = certs.issue(ca, "b", NOW, validity_days=365)
    assert certs.not_after(leaf.cert_pem) == certs.not_after(ca.cert_pem)  # never past the CA
    renewed = certs.renew_ca(ca, NOW + dt.timedelta(days=90))
    assert renewed.key_pem == ca.key_pem
    assert certs.not_after(renewed.cert_pem) > certs.not_after(ca.cert_pem)
    assert certs.signed_by(leaf.cert_pem, renewed.cert_pem)  # same subject and key: still trusted
    client = certs.issue(renewed, "alice", NOW, server=False)
    assert certs.signed_by(client.cert_pem, ca.cert_pem)
    assert certs.principal_of("alice") == "User:CN=alice"
