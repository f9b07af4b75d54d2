"""helm (v4, server-side apply) against the emulator: install, upgrade, uninstall of a chart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.kubeapi.harness import KubeApi

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


def test_helm_install_upgrade_uninstall(kubeapi: KubeApi, tmp_path: Path) -> None:
    kubeapi.helm("create", str(tmp_path / "demo"))
    kubeapi.helm("install", "demo", str(tmp_path / "demo"), "--namespace", "helm-test", "--create-namespace")
    releases = json.loads(kubeapi.helm("list", "-n", "helm-test", "-o", "json").stdout)
    assert [(r["name"], r["status"], r["revision"]) for r in releases] == [("demo", "deployed", "1")]
    deploy = json.loads(kubeapi.kubectl("get", "-n", "helm-test", "deploy", "demo", "-o", "json").stdout)
    assert deploy["spec"]["replicas"] == 1

    kubeapi.helm("upgrade", "demo", str(tmp_path / "demo"), "-n", "helm-test", "--set", "replicaCount=3")
    out = kubeapi.kubectl("get", "-n", "helm-test", "deploy", "demo", "-o", "jsonpath={.spec.replicas}")
    assert out.stdout == "3"
    assert "sh.helm.release.v1.demo.v2" in kubeapi.kubectl("get", "-n", "helm-test", "secrets").stdout

    kubeapi.helm("uninstall", "demo", "-n", "helm-test")
    left = kubeapi.kubectl("get", "-n", "helm-test", "deploy,svc,secrets", "-o", "name").stdout.split()
    assert left == []
