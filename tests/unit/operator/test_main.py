"""The `brook-operator` command, the rack init container, and handler registration."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import aiohttp
import kopf
import pytest

from brook_operator import main, rackinit
from brook_operator.kube import RACK_INIT_PERMISSIONS, Kube


def test_run_defaults_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROOK_OPERATOR_NAMESPACE", "brook-system")
    monkeypatch.setenv("BROOK_OPERATOR_POD_NAME", "brook-operator-abc")
    monkeypatch.setenv("BROOK_OPERATOR_LEADER_ELECTION", "false")
    monkeypatch.setenv("BROOK_OPERATOR_WATCH_NAMESPACES", "a,b")
    monkeypatch.setenv("BROOK_DEFAULT_IMAGE", "img:1")
    monkeypatch.setenv("BROOK_OPERATOR_BOOTSTRAP_TEMPLATE", "127.0.0.1:{port}")
    a = main.build_parser().parse_args(["run"])
    assert a.lease_namespace == "brook-system"
    assert a.identity == "brook-operator-abc"
    assert a.leader_election == "false"
    assert a.namespace == ["a", "b"]
    assert a.default_image == "img:1"
    assert a.bootstrap_template == "127.0.0.1:{port}"
    assert a.lease_name == "brook-operator"
    assert a.rack_cluster_role == "brook-broker-rack"


def test_rack_init_arguments() -> None:
    a = main.build_parser().parse_args(
        ["rack-init", "--node", "n1", "--topology-key", "topology.kubernetes.io/zone", "--output", "/x/rack"]
    )
    assert (a.command, a.node, a.topology_key, a.output) == (
        "rack-init",
        "n1",
        "topology.kubernetes.io/zone",
        Path("/x/rack"),
    )


def test_rack_of_a_node() -> None:
    node = {"metadata": {"labels": {"topology.kubernetes.io/zone": "eu-1a"}}}
    assert rackinit.rack_of(node, "topology.kubernetes.io/zone") == "eu-1a"
    assert rackinit.rack_of(node, "other") == ""
    assert rackinit.rack_of(None, "x") == ""


class _Nodes:
    def __init__(self, node: dict[str, Any] | None) -> None:
        self.node = node
        self.asked: list[str] = []

    async def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        self.asked.append(f"{kind}/{name}")
        return self.node


def test_rack_init_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "run" / "rack"
    nodes = _Nodes({"metadata": {"labels": {"zone": "z2"}}})
    rack = asyncio.run(rackinit.rack_init("n1", "zone", out, nodes))  # type: ignore[arg-type]
    assert rack == "z2" and out.read_text() == "z2" and nodes.asked == ["Node/n1"]
    asyncio.run(rackinit.rack_init("n1", "missing", out, nodes))  # type: ignore[arg-type]
    assert out.read_text() == ""


def test_rack_init_only_asks_for_nodes() -> None:
    assert frozenset({("", "nodes", "get")}) == RACK_INIT_PERMISSIONS
    assert isinstance(Kube, type)


def test_health_endpoint() -> None:
    async def scenario() -> str:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        runner = await main._health_server(port)
        assert runner is not None
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{port}/healthz") as r,
            ):
                return f"{r.status} {await r.text()}"
        finally:
            await runner.cleanup()

    assert asyncio.run(scenario()) == "200 ok"
    assert asyncio.run(main._health_server(0)) is None


def test_handlers_register_with_kopf() -> None:
    import brook_operator.handlers  # noqa: F401

    r = kopf.get_default_registry()
    changing = {
        (h.id, str(h.reason), h.selector.any_name) for h in r._changing.get_all_handlers() if h.selector
    }
    assert ("cluster_deleted", "delete", "clusters") in changing
    assert ("topic_deleted", "delete", "topics") in changing
    assert ("user_deleted", "delete", "users") in changing
    assert {("user_changed", reason, "users") for reason in ("create", "update")} <= changing
    assert {("cluster_changed", reason, "clusters") for reason in ("create", "update")} <= changing
    timers = {(h.id, h.selector.any_name) for h in r._spawning.get_all_handlers() if h.selector}
    assert timers == {
        ("cluster_resync", "clusters"),
        ("cluster_autoscale", "clusters"),
        ("topic_reconcile", "topics"),
        ("user_resync", "users"),
    }
    indices = {h.id for h in r._indexing.get_all_handlers()}
    assert indices == {"cluster_ports", "topic_claims"}


def test_kopf_settings_keep_bookkeeping_out_of_status() -> None:
    from brook_operator.handlers import settings as s

    cfg = kopf.OperatorSettings()
    s.configure(settings=cfg)
    assert cfg.persistence.finalizer == "brook.dev/finalizer"
    assert isinstance(cfg.persistence.progress_storage, kopf.AnnotationsProgressStorage)
    assert isinstance(cfg.persistence.diffbase_storage, kopf.AnnotationsDiffBaseStorage)
    assert cfg.peering.standalone is True
