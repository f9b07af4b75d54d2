"""How the operator reaches a cluster's Kafka admin: the plain bootstrap of an unsecured cluster, the
replication listener with the operator's certificate on a secured one (admin_access.cluster_admin)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Mapping

from brook_operator import tls
from brook_operator.admin_access import cluster_admin
from brook_operator.spec import parse_cluster

from .fakes import FakeKube

TEMPLATE = "{name}-bootstrap.{namespace}.svc:{port}"
SECURED = {"replicas": 1, "listeners": [{"name": "tls", "port": 9093, "tls": True}]}


class Connections:
    def __init__(self) -> None:
        self.made: list[tuple[str, Mapping[str, str] | None]] = []

    def __call__(self, bootstrap: str, security: Mapping[str, str] | None = None) -> str:
        self.made.append((bootstrap, security))
        return "admin"


def test_unsecured_cluster_through_its_bootstrap() -> None:
    conns = Connections()
    spec = parse_cluster("demo", {"replicas": 1})
    admin = asyncio.run(cluster_admin(conns, FakeKube(), "demo", "kafka", spec, TEMPLATE))
    assert admin == "admin"
    assert conns.made == [("demo-bootstrap.kafka.svc:9092", None)]
    asyncio.run(cluster_admin(conns, FakeKube(), "demo", "kafka", spec, "127.0.0.1:{port}"))
    assert conns.made[-1] == ("127.0.0.1:9092", None)  # a template for tests outside Kubernetes


def test_secured_cluster_through_the_replication_listener_with_the_operator_certificate() -> None:
    conns, kube = Connections(), FakeKube()
    spec = parse_cluster("demo", SECURED)
    asyncio.run(cluster_admin(conns, kube, "demo", "kafka", spec, TEMPLATE))
    assert conns.made == [(f"demo-bootstrap.kafka.svc:{spec.replication_port}", {})]  # no certificate yet

    for m in tls.secrets("demo", "kafka", spec, {}, dt.datetime(2026, 11, 27, tzinfo=dt.UTC)):
        kube.put(m)
    asyncio.run(cluster_admin(conns, kube, "demo", "kafka", spec, TEMPLATE, verify_hostname=False))
    bootstrap, security = conns.made[-1]
    assert bootstrap == f"demo-bootstrap.kafka.svc:{spec.replication_port}"
    assert security is not None and security["security.protocol"] == "SSL"
    assert security["ssl.certificate.pem"].startswith("-----BEGIN CERTIFICATE-----")
    assert security["ssl.endpoint.identification.algorithm"] == "none"
