"""An application outside the Kubernetes cluster, end to end on the real control plane:
a Cluster with an external NodePort listener (TLS, SCRAM-SHA-512) → the operator makes one Service per
broker plus a bootstrap Service with node ports, and each broker advertises its node's address with its
own node port → a User → a client that knows only <node address>:<bootstrap node port> and the User's
Secret produces and consumes, every connection going through the node ports (the pod runner listens on
them as kube-proxy would on every node; the fake nodes' address is 127.0.0.1).

LoadBalancer listeners are not run here: every per-broker Service would need an address of its own, and
tests use 127.0.0.1 only; their builders are unit-tested.
"""

from __future__ import annotations

import base64
import json
import socket
import uuid
from collections.abc import Iterator
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

NS = "external"
CLUSTER = "ext"


def _free_node_ports(count: int) -> int:
    """A first node port N in Kubernetes' range with N .. N+count-1 free on 127.0.0.1."""
    for first in range(30000 + uuid.uuid4().int % 2000, 32767 - count):
        socks: list[socket.socket] = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                s.bind(("127.0.0.1", port))
                socks.append(s)
            return first
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free node ports")


@pytest.fixture(scope="module")
def env(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    workdir = tmp_path_factory.mktemp("external-e2e")
    install_operator(kube, NS)
    runner = start_runner(kube, workdir, NS, max_grace_seconds=10)
    try:
        ports = {"plain": runner.reserve_port(), "replication": runner.reserve_port()}
        log = workdir / "operator.log"
        with operator_process(
            operator_account(kube), NS, log, kube, BROOK_OPERATOR_TLS_VERIFY_HOSTNAME="false"
        ):
            yield {"kube": kube, "ports": ports, "log": log, "workdir": workdir}
    finally:
        runner.stop(grace=5)
        kube.kubectl("delete", "namespace", NS, "--wait=false", check=False)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_an_outside_client_connects_through_node_ports(env: dict[str, Any], tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer

    kube: Kube = env["kube"]

    def kubectl(*args: str, input: str | None = None, timeout: float = 60) -> str:
        return kube.kubectl(*args, "-n", NS, input=input, timeout=timeout).stdout

    def logs() -> str:
        out = ["--- operator.log", tail(env["log"], 60)]
        for p in sorted(env["workdir"].glob("pods/*/*/logs/*.log"), key=lambda p: p.stat().st_mtime)[-4:]:
            out += [f"--- {p.name}", tail(p, 20)]
        return "\n".join(out)

    node_port = _free_node_ports(2)  # the bootstrap's, then broker 0's (node_port + 1)
    cluster = {
        "apiVersion": "brook.dev/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": NS},
        "spec": {
            "replicas": 1,
            "storage": {"type": "ephemeral", "size": "1Gi"},
            "replicationPort": env["ports"]["replication"],
            "listeners": [
                {"name": "plain", "port": env["ports"]["plain"]},
                {
                    "name": "outside",
                    "port": 9094,
                    "type": "nodeport",
                    "nodePort": node_port,
                    "tls": True,
                    "authentication": "scram-sha-512",
                },
            ],
        },
    }
    kubectl("apply", "-f", "-", input=json.dumps(cluster))
    try:
        kubectl("wait", "--for=condition=Ready", f"cluster/{CLUSTER}", "--timeout=150s", timeout=160)
    except Exception:
        print(logs())
        raise
    services = json.loads(kubectl("get", "services", "-o", "json"))["items"]
    node_ports = {
        s["metadata"]["name"]: [p.get("nodePort") for p in s["spec"]["ports"]]
        for s in services
        if s["spec"].get("type") == "NodePort"
    }
    assert node_ports == {
        f"{CLUSTER}-outside-bootstrap": [node_port],
        f"{CLUSTER}-outside-0": [node_port + 1],
    }

    user = {
        "apiVersion": "brook.dev/v1alpha1",
        "kind": "User",
        "metadata": {"name": "outsider", "namespace": NS},
        "spec": {"cluster": CLUSTER, "authentication": {"type": "scram-sha-512"}},
    }
    kubectl("apply", "-f", "-", input=json.dumps(user))
    kubectl("wait", "--for=condition=Ready", "user/outsider", "--timeout=90s", timeout=100)
    secret = {
        k: base64.b64decode(v)
        for k, v in json.loads(kubectl("get", "secret", "outsider", "-o", "json"))["data"].items()
    }
    ca = tmp_path / "ca.crt"
    ca.write_bytes(secret["ca.crt"])
    conf = {
        # What a user outside has: a node's address and the bootstrap node port.
        "bootstrap.servers": f"127.0.0.1:{node_port}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": secret["username"].decode(),
        "sasl.password": secret["password"].decode(),
        "ssl.ca.location": str(ca),
        "ssl.endpoint.identification.algorithm": "none",
    }
    # Metadata advertises the node address with the broker's own node port: the client uses it.
    from confluent_kafka.admin import AdminClient

    brokers = AdminClient(conf).list_topics(timeout=30).brokers
    assert {(b.host, b.port) for b in brokers.values()} == {("127.0.0.1", node_port + 1)}, logs()
    value = uuid.uuid4().hex.encode()
    p = Producer({**conf, "acks": "all"})
    p.produce("outside", value)
    assert p.flush(60) == 0, logs()
    c = Consumer({**conf, "group.id": "outsiders", "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["outside"])
        got = None
        for _ in range(120):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got = m.value()
                break
        assert got == value, logs()
    finally:
        c.close()
