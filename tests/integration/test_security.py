"""Listeners, TLS and SASL with real clients: confluent-kafka and kcat against one broker with a
PLAINTEXT, an SSL, a SASL_SSL and a SASL_PLAINTEXT listener (certificates from trustme)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from scramp import ScramClient

from tests.support.broker import BrokerProcess
from tests.support.ports import free_port
from tests.support.raw import RawClient

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
REAUTH_MS = 3000  # connections.max.reauth.ms: clients re-authenticate during the tests (KIP-368)


@dataclass
class Env:
    broker: BrokerProcess
    ports: dict[str, int]
    ca_file: str
    client_cert: str
    client_key: str
    rogue_cert: str
    rogue_key: str

    def addr(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def _write(path: Path, blob: Any) -> str:
    blob.write_to_path(str(path))
    return str(path)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("security")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client@example.com", common_name="alice-client", organization_name="Example")
    rogue = trustme.CA().issue_cert("rogue", common_name="rogue")
    server_pem = tmp / "server.pem"
    server.private_key_and_cert_chain_pem.write_to_path(str(server_pem))
    ports = {name: free_port() for name in ("SSL", "SASL_SSL", "SASL_PLAINTEXT")}
    broker = BrokerProcess(tmp / "data")
    ports["PLAINTEXT"] = broker.port
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    broker.args = [
        "--listeners",
        listeners,
        "--ssl-keystore-location",
        str(server_pem),
        "--ssl-truststore-location",
        _write(tmp / "ca.pem", ca.cert_pem),
        "--ssl-client-auth",
        "requested",
        "--sasl-enabled-mechanisms",
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "--num-partitions",
        "1",
        "--connections-max-reauth-ms",
        str(REAUTH_MS),
    ]
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for user, password in USERS.items():
        for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            # One request each: Kafka refuses a user twice in one request.
            upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 4096), password.encode())
            for fut in admin.alter_user_scram_credentials([upsert]).values():
                fut.result(timeout=30)
    try:
        yield Env(
            broker,
            ports,
            str(tmp / "ca.pem"),
            _write(tmp / "client.crt", client.cert_chain_pems[0]),
            _write(tmp / "client.key", client.private_key_pem),
            _write(tmp / "rogue.crt", rogue.cert_chain_pems[0]),
            _write(tmp / "rogue.key", rogue.private_key_pem),
        )
    finally:
        broker.stop()


def _ssl(env: Env) -> dict[str, Any]:
    return {"ssl.ca.location": env.ca_file, "ssl.endpoint.identification.algorithm": "https"}


def _sasl(mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def _roundtrip(conf: dict[str, Any], timeout: float = 30.0) -> None:
    """Produce three records and read them back in a group (metadata, produce, fetch, group APIs)."""
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    producer = Producer({**conf, "message.timeout.ms": int(timeout * 1000)})
    for i in range(3):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(timeout) == 0
    consumer = Consumer(
        {**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(bytes(msg.value()))
        assert got == [b"v0", b"v1", b"v2"]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _refused(conf: dict[str, Any], why: str, timeout: float = 30.0) -> str:
    """The client's first error when it cannot talk to the broker, which must say `why` (a client that
    merely gets no answer is not refused)."""
    errors: list[str] = []
    producer = Producer({**conf, "error_cb": lambda e: errors.append(str(e))})
    deadline = time.monotonic() + timeout
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "the client was not refused"
    time.sleep(0.5)  # what the client reports next (the transport error may follow ALL_BROKERS_DOWN)
    producer.poll(0)
    assert any(why in e for e in errors), errors
    return errors[0]


def test_ssl_listener_answers_with_its_own_addresses(env: Env) -> None:
    conf = {"bootstrap.servers": env.addr("SSL"), "security.protocol": "SSL", **_ssl(env)}
    md = AdminClient(conf).list_topics(timeout=20)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", env.ports["SSL"])]
    _roundtrip(conf)


def test_mutual_tls(env: Env) -> None:
    conf = {
        "bootstrap.servers": env.addr("SSL"),
        "security.protocol": "SSL",
        "ssl.certificate.location": env.client_cert,
        "ssl.key.location": env.client_key,
        **_ssl(env),
    }
    _roundtrip(conf)


def test_untrusted_client_certificate_is_refused(env: Env) -> None:
    conf = {
        "bootstrap.servers": env.addr("SSL"),
        "security.protocol": "SSL",
        "ssl.certificate.location": env.rogue_cert,
        "ssl.key.location": env.rogue_key,
        **_ssl(env),
    }
    # The broker's alert names the reason (an unknown CA), so the client's error does too.
    _refused(conf, "unknown ca")
    # Unharmed: another client is served.
    AdminClient({"bootstrap.servers": env.broker.bootstrap}).list_topics(timeout=20)


def test_plaintext_client_on_tls_port_and_tls_client_on_plaintext_port(env: Env) -> None:
    # A Kafka request in plaintext to the SSL listener is no TLS record: closed at once, unanswered.
    with RawClient(env.addr("SSL")) as raw:
        req = MetadataRequest(topics=None)
        req.with_header(correlation_id=1, client_id="raw-test")
        raw.send_frame(req.encode(version=1, header=True))
        assert raw.is_closed(wait=5)
    # A TLS ClientHello to the plaintext listener is no Kafka frame: the handshake fails at once.
    host, port = env.broker.bootstrap.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=env.ca_file)
    with socket.create_connection((host, int(port)), timeout=5) as sock, pytest.raises(ssl.SSLError):
        ctx.wrap_socket(sock, server_hostname="127.0.0.1")
    AdminClient({"bootstrap.servers": env.broker.bootstrap}).list_topics(timeout=20)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_sasl_ssl_roundtrip(env: Env, mechanism: str) -> None:
    conf = {
        "bootstrap.servers": env.addr("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        **_ssl(env),
        **_sasl(mechanism, "alice", USERS["alice"]),
    }
    _roundtrip(conf)


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("SCRAM-SHA-512", "alice", "wrong"),
        ("SCRAM-SHA-256", "nobody", "x"),
        ("PLAIN", "alice", "wrong"),
        ("PLAIN", "nobody", "x"),
    ],
)
def test_bad_credentials_are_refused(env: Env, mechanism: str, user: str, password: str) -> None:
    conf = {
        "bootstrap.servers": env.addr("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        **_sasl(mechanism, user, password),
    }
    _refused(conf, "Authentication failed")
    # The right password still works at once.
    _roundtrip({**conf, **_sasl(mechanism, "bob", USERS["bob"])})


def _raw_sasl(env: Env) -> RawClient:
    return RawClient(env.addr("SASL_PLAINTEXT"))


def test_request_before_authentication_closes_the_connection(env: Env) -> None:
    with _raw_sasl(env) as raw:
        req = MetadataRequest(topics=None)
        req.with_header(correlation_id=1, client_id="raw-test")
        raw.send_frame(req.encode(version=1, header=True))
        assert raw.is_closed(wait=10)


def test_disabled_mechanism_is_answered_then_closed(env: Env) -> None:
    with _raw_sasl(env) as raw:
        resp = raw.request(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert resp.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert sorted(resp.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert raw.is_closed(wait=10)


def _plain_login(raw: RawClient, user: str, password: str) -> Any:
    assert raw.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    return raw.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), 1)


def test_handshake_v0_plain_runs_on_raw_tokens(env: Env) -> None:
    """Kafka before 1.0 (kafka-python 2.0, Sarama below V1_0_0): after SaslHandshake v0 the tokens travel
    as bare size-prefixed frames; PLAIN's success is an empty one."""
    with _raw_sasl(env) as raw:
        assert raw.request(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        raw.send_frame(f"\0alice\0{USERS['alice']}".encode())
        assert raw.read_frame() == b""
        assert raw.request(MetadataRequest(topics=None), 1).brokers


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_handshake_v0_scram_runs_on_raw_tokens(env: Env, mechanism: str) -> None:
    with _raw_sasl(env) as raw:
        assert raw.request(SaslHandshakeRequest(mechanism=mechanism), 0).error_code == 0
        client = ScramClient([mechanism], "bob", USERS["bob"])
        raw.send_frame(client.get_client_first().encode())
        client.set_server_first(raw.read_frame().decode())
        raw.send_frame(client.get_client_final().encode())
        client.set_server_final(raw.read_frame().decode())  # checks the server's signature
        assert raw.request(MetadataRequest(topics=None), 1).brokers


def test_handshake_v0_wrong_password_closes_without_an_answer(env: Env) -> None:
    with _raw_sasl(env) as raw:
        assert raw.request(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        raw.send_frame(b"\0alice\0not-her-password")
        assert raw.is_closed(wait=10)


def test_expired_session_without_reauthentication_is_closed(env: Env) -> None:
    with _raw_sasl(env) as raw:
        resp = _plain_login(raw, "bob", USERS["bob"])
        assert (resp.error_code, resp.session_lifetime_ms) == (0, REAUTH_MS)
        assert raw.request(MetadataRequest(topics=None), 1).brokers
        time.sleep(REAUTH_MS / 1000 + 0.5)  # the session's lifetime is the condition here
        req = MetadataRequest(topics=None)
        req.with_header(correlation_id=99, client_id="raw-test")
        raw.send_frame(req.encode(version=1, header=True))
        assert raw.is_closed(wait=10)


def test_reauthentication_keeps_the_connection(env: Env) -> None:
    with _raw_sasl(env) as raw:
        assert _plain_login(raw, "bob", USERS["bob"]).error_code == 0
        time.sleep(REAUTH_MS / 1000 + 0.5)
        assert _plain_login(raw, "bob", USERS["bob"]).error_code == 0  # re-authenticated in time
        assert raw.request(MetadataRequest(topics=None), 1).brokers
        # Another principal on the same connection is refused (Kafka: the principal may not change).
        assert _plain_login(raw, "alice", USERS["alice"]).error_code == 58
        assert raw.is_closed(wait=10)


def test_clients_reauthenticate_across_session_lifetimes(env: Env) -> None:
    conf = {
        "bootstrap.servers": env.addr("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        **_ssl(env),
        **_sasl("SCRAM-SHA-256", "alice", USERS["alice"]),
    }
    errors: list[str] = []
    producer = Producer({**conf, "error_cb": lambda e: errors.append(str(e))})
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    end = time.monotonic() + 2.5 * REAUTH_MS / 1000
    sent = 0
    while time.monotonic() < end:  # one connection kept busy across two session expiries
        producer.produce(topic, b"x")
        assert producer.flush(30) == 0
        sent += 1
        time.sleep(0.2)
    low, high = Consumer({**conf, "group.id": "wm"}).get_watermark_offsets(
        TopicPartition(topic, 0), timeout=20
    )
    assert high - low == sent
    assert errors == []  # no failed re-authentication (librdkafka would reconnect and hide it)


def test_kcat_over_sasl_ssl(env: Env) -> None:
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    common = [
        "kcat",
        "-b",
        env.addr("SASL_SSL"),
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        f"ssl.ca.location={env.ca_file}",
        "-X",
        "sasl.mechanism=SCRAM-SHA-512",
        "-X",
        "sasl.username=bob",
        "-X",
        f"sasl.password={USERS['bob']}",
    ]
    subprocess.run(
        [*common, "-P", "-t", topic], input=b"one\ntwo\n", check=True, timeout=60, capture_output=True
    )
    out = subprocess.run(
        [*common, "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.split() == [b"one", b"two"]


def test_principal_of_a_client_certificate() -> None:
    from brook.security.tls import principal_of

    ca = trustme.CA()
    cert = ca.issue_cert("x@example.com", common_name="alice", organization_name="Example")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("server").configure_cert(server_ctx)
    ca.configure_trust(server_ctx)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    cert.configure_cert(client_ctx)
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="server")
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (client, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    # RFC 2253 order, most specific first (trustme adds an OU)
    principal = principal_of(server)
    assert principal is not None and principal.startswith("User:CN=alice,OU=")
    assert principal.endswith(",O=Example")
    assert principal_of(None) is None


def _python_ssl(env: Env) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=env.ca_file)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kafka_python_over_sasl_ssl(env: Env, mechanism: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    conf: dict[str, Any] = {
        "bootstrap_servers": env.addr("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_context": _python_ssl(env),
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "bob",
        "sasl_plain_password": USERS["bob"],
    }
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**conf)
    for i in range(3):
        producer.send(topic, f"v{i}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=20_000, **conf
    )
    got = [m.value for _, m in zip(range(3), consumer, strict=False)]
    consumer.close()
    assert got == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_aiokafka_over_sasl_ssl(env: Env, mechanism: str) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    conf: dict[str, Any] = {
        "bootstrap_servers": env.addr("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_context": _python_ssl(env),
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "alice",
        "sasl_plain_password": USERS["alice"],
    }
    topic = f"aio-{uuid.uuid4().hex[:8]}"

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(topic, f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **conf)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for msg in consumer:
                    assert msg.value is not None
                    got.append(msg.value)
                    if len(got) == 3:
                        break
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [b"v0", b"v1", b"v2"]
