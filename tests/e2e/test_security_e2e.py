"""A secured Cluster and a User end to end, with real processes (see test_operator_e2e.py for the
setting): the real control plane, the pod runner as its node agent, `brook-operator run` and a `brook
broker`, plus confluent-kafka as the application.

kubectl apply a one-broker Cluster with a SASL_SSL (SCRAM-SHA-512) listener and ACLs enforced → the
operator makes the CAs and the brokers' certificate, adds its mutual-TLS replication listener and
administers the cluster through it with its own certificate → the Cluster turns Ready → kubectl apply
a User → its Secret holds a generated password, a sasl.jaas.config line, the bootstrap address and
the CA → the application connects with exactly that and produces and consumes what its ACLs allow,
and is refused the rest → kubectl delete the User → the same application is refused.

The runner cannot give the broker's certificate the test's addresses (127.0.0.1), so the clients check
the CA but not the host name; everything else is as in a cluster.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.controlplane import Kube
from tests.e2e.operator_harness import (
    install_operator,
    operator_account,
    operator_process,
    start_runner,
    tail,
)

NS = "secure"
CLUSTER = "sec"


@dataclass
class Env:
    kube: Kube
    workdir: Path
    operator_log: Path
    plain: int
    scram: int
    replication: int

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 60) -> str:
        return self.kube.kubectl(*args, "-n", NS, input=input, timeout=timeout).stdout

    def get(self, *what: str) -> Any:
        return json.loads(self.kubectl("get", *what, "-o", "json"))

    def secret(self, name: str) -> dict[str, bytes]:
        return {k: base64.b64decode(v) for k, v in self.get("secret", name)["data"].items()}

    def logs(self) -> str:
        out = ["--- operator.log", tail(self.operator_log, 60)]
        for log in sorted(self.workdir.glob("pods/*/*/logs/*.log"), key=lambda p: p.stat().st_mtime)[-4:]:
            out += [f"--- {log.name}", tail(log, 20)]
        return "\n".join(out)


@pytest.fixture(scope="module")
def env(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    workdir = tmp_path_factory.mktemp("security-e2e")
    install_operator(kube, NS)
    runner = start_runner(kube, workdir, NS, max_grace_seconds=10)
    try:
        ports = [runner.reserve_port() for _ in range(3)]
        log = workdir / "operator.log"
        with operator_process(
            operator_account(kube), NS, log, kube, BROOK_OPERATOR_TLS_VERIFY_HOSTNAME="false"
        ):
            yield Env(kube, workdir, log, *ports)
    finally:
        runner.stop(grace=5)
        kube.kubectl("delete", "namespace", NS, "--wait=false", check=False)


def _client(e: Env, secret: dict[str, bytes], tmp: Path) -> dict[str, Any]:
    """The application's settings, taken from the User's Secret as a user would."""
    ca = tmp / f"ca-{uuid.uuid4().hex[:6]}.crt"
    ca.write_bytes(secret["ca.crt"])
    return {
        # The Secret names the in-cluster bootstrap Service; here its proxy is on 127.0.0.1.
        "bootstrap.servers": f"127.0.0.1:{e.scram}",
        "security.protocol": secret["security.protocol"].decode(),
        "sasl.mechanisms": secret["sasl.mechanism"].decode(),
        "sasl.username": secret["username"].decode(),
        "sasl.password": secret["password"].decode(),
        "ssl.ca.location": str(ca),
        "ssl.endpoint.identification.algorithm": "none",
    }


@pytest.fixture(scope="module")
def secured(env: Env) -> Env:
    """The Cluster both tests use: one broker, a SASL_SSL (SCRAM-SHA-512) listener, ACLs enforced."""
    cluster = {
        "apiVersion": "brook.dev/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": NS},
        "spec": {
            "replicas": 1,
            "storage": {"type": "ephemeral", "size": "1Gi"},
            "replicationPort": env.replication,
            "authorization": {"enabled": True},
            "listeners": [
                {"name": "plain", "port": env.plain},
                {"name": "scram", "port": env.scram, "tls": True, "authentication": "scram-sha-512"},
            ],
        },
    }
    env.kubectl("apply", "-f", "-", input=json.dumps(cluster))
    try:
        env.kubectl("wait", "--for=condition=Ready", f"cluster/{CLUSTER}", "--timeout=150s", timeout=160)
    except Exception:
        print(env.logs())
        raise
    for name in ("sec-cluster-ca", "sec-clients-ca", "sec-broker-tls", "sec-operator-tls"):
        assert env.secret(name)["ca.crt" if name.endswith("-ca") else "tls.crt"].startswith(b"-----BEGIN")
    return env


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_user_connects_with_its_secret_and_is_refused_once_deleted(secured: Env, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, KafkaError, Producer

    env = secured

    user = {
        "apiVersion": "brook.dev/v1alpha1",
        "kind": "User",
        "metadata": {"name": "app", "namespace": NS},
        "spec": {
            "cluster": CLUSTER,
            "authentication": {"type": "scram-sha-512"},
            "authorization": {
                "acls": [
                    {
                        "resource": {"type": "topic", "name": "orders"},
                        "operations": ["Create", "Write", "Read"],
                    },
                    {"resource": {"type": "group", "name": "app"}, "operations": ["Read"]},
                ]
            },
            "quotas": {"producerByteRate": 10485760, "consumerByteRate": 20971520},
        },
    }
    env.kubectl("apply", "-f", "-", input=json.dumps(user))
    try:
        env.kubectl("wait", "--for=condition=Ready", "user/app", "--timeout=90s", timeout=100)
    except Exception:
        print(env.logs())
        raise
    secret = env.secret("app")
    assert secret["bootstrap.servers"] == f"{CLUSTER}-bootstrap.{NS}.svc:{env.scram}".encode()
    assert b'username="app"' in secret["sasl.jaas.config"]
    conf = _client(env, secret, tmp_path)

    value = uuid.uuid4().hex.encode()
    delivered: list[Any] = []
    p = Producer({**conf, "acks": "all"})
    p.produce("orders", value, on_delivery=lambda err, _m: delivered.append(err))
    # Its ACLs allow "orders" only: another topic is refused as Kafka refuses it.
    p.produce("payroll", value, on_delivery=lambda err, _m: delivered.append(err))
    assert p.flush(60) == 0, env.logs()
    assert delivered[0] is None or delivered[1] is None, delivered
    codes = sorted(e.code() if e is not None else 0 for e in delivered)
    assert codes == [0, KafkaError.TOPIC_AUTHORIZATION_FAILED], delivered
    c = Consumer({**conf, "group.id": "app", "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["orders"])
        got = None
        for _ in range(120):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got = m.value()
                break
        assert got == value
    finally:
        c.close()

    try:
        env.kubectl("delete", "user", "app", "--timeout=60s", timeout=70)
    except Exception:
        print(env.logs())
        raise
    errors: list[KafkaError] = []
    refused = Producer({**conf, "error_cb": errors.append})
    for _ in range(100):
        refused.poll(0.2)
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            break
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), (errors, env.logs())


def _served_cert(port: int) -> bytes:
    """The certificate the broker presents to a new TLS connection (DER), verification off on purpose:
    this only looks at what is served."""
    import socket
    import ssl

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_renewed_broker_certificate_keeps_clients_connected(secured: Env, tmp_path: Path) -> None:
    """The broker's certificate is replaced by one about to expire (inside renewBeforeDays): the operator
    renews it, the pod's mounted Secret follows, the broker serves the new one to new connections
    without a restart, and a producer connected all along keeps delivering without an error."""
    import datetime as dt
    import time

    from confluent_kafka import Producer
    from cryptography import x509

    from brook_operator import certs

    env = secured
    user = {
        "apiVersion": "brook.dev/v1alpha1",
        "kind": "User",
        "metadata": {"name": "renewal", "namespace": NS},
        "spec": {
            "cluster": CLUSTER,
            "authentication": {"type": "scram-sha-512"},
            "authorization": {
                "acls": [
                    {"resource": {"type": "topic", "name": "renewal"}, "operations": ["Create", "Write"]}
                ]
            },
        },
    }
    env.kubectl("apply", "-f", "-", input=json.dumps(user))
    env.kubectl("wait", "--for=condition=Ready", "user/renewal", "--timeout=90s", timeout=100)
    conf = _client(env, env.secret("renewal"), tmp_path)
    errors: list[Any] = []
    delivered: list[Any] = []
    p = Producer({**conf, "acks": "all", "error_cb": errors.append})

    def produce_some(n: int) -> None:
        for _ in range(n):
            p.produce("renewal", b"v", on_delivery=lambda err, _m: delivered.append(err))
            p.poll(0.1)

    produce_some(5)
    assert p.flush(60) == 0 and delivered and all(e is None for e in delivered), (delivered, env.logs())

    def serial(der: bytes) -> int:
        return x509.load_der_x509_certificate(der).serial_number

    original = serial(_served_cert(env.scram))
    ca_secret = env.secret(f"{CLUSTER}-cluster-ca")
    ca = certs.KeyPair(ca_secret["ca.crt"], ca_secret["ca.key"])
    current = env.secret(f"{CLUSTER}-broker-tls")
    now = dt.datetime.now(dt.UTC)
    short = certs.issue(
        ca, f"{CLUSTER}-broker", now, hosts=sorted(certs.hosts_of(current["tls.crt"])), validity_days=2
    )
    patch = {
        "data": {
            "tls.crt": base64.b64encode(short.cert_pem).decode(),
            "tls.key": base64.b64encode(short.key_pem).decode(),
        }
    }
    env.kubectl("patch", "secret", f"{CLUSTER}-broker-tls", "--type=merge", "-p", json.dumps(patch))
    short_serial = certs.load_cert(short.cert_pem).serial_number

    renewed = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        produce_some(3)  # the connected producer keeps working throughout
        der = _served_cert(env.scram)
        cert = x509.load_der_x509_certificate(der)
        if cert.serial_number not in (
            original,
            short_serial,
        ) and cert.not_valid_after_utc > now + dt.timedelta(days=300):
            renewed = cert
            break
        time.sleep(0.5)
    assert renewed is not None, ("the broker never served a renewed certificate", env.logs())
    produce_some(5)
    assert p.flush(60) == 0, env.logs()
    assert all(e is None for e in delivered), (delivered, env.logs())
    assert not errors, errors
    env.kubectl("delete", "user", "renewal", "--timeout=60s", timeout=70)
