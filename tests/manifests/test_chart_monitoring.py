"""charts/brook monitoring objects (off by default): a ServiceMonitor for the brokers, a PrometheusRule
with the broker's alert and recording rules, a ConfigMap with the Grafana dashboard. The chart's copies
of the rules and the dashboard must not drift from the broker's assets."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from .conftest import Helm
from .support import CHART, KUBE_VERSIONS, REPO, docs

Render = Callable[..., str]
ASSETS = REPO / "services" / "brook" / "observability" / "assets"
ON = (
    "--set",
    "monitoring.serviceMonitor.enabled=true",
    "--set",
    "monitoring.prometheusRule.enabled=true",
    "--set",
    "monitoring.grafanaDashboard.enabled=true",
)


@pytest.mark.parametrize(
    ("copy", "source"), [("alerts.yaml", "alerts.yaml"), ("grafana-dashboard.json", "grafana-dashboard.json")]
)
def test_chart_files_are_byte_identical_to_the_broker_assets(copy: str, source: str) -> None:
    assert (CHART / "files" / copy).read_bytes() == (ASSETS / source).read_bytes(), (
        f"charts/brook/files/{copy} differs from services/brook/observability/assets/{source}: "
        f"cp services/brook/observability/assets/{source} charts/brook/files/{copy}"
    )


def monitoring(render: Render, *args: str) -> dict[str, dict[str, Any]]:
    return {
        d["kind"]: d
        for d in docs(render(*args))
        if d["kind"] in ("ServiceMonitor", "PrometheusRule", "ConfigMap")
    }


def test_off_by_default(render: Render) -> None:
    assert monitoring(render) == {}


def test_helm_lint_strict_with_monitoring(helm: Helm) -> None:
    out = helm("lint", "--strict", str(CHART), *ON).stdout
    assert "1 chart(s) linted, 0 chart(s) failed" in out


def test_service_monitor_selects_the_brokers_headless_service(render: Render) -> None:
    from brook_operator.resources import cluster_manifests
    from brook_operator.spec import parse_cluster

    sm = monitoring(render, *ON, "--set", "monitoring.serviceMonitor.labels.release=kps")["ServiceMonitor"]
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["namespace"] == "brook-system" and sm["metadata"]["labels"]["release"] == "kps"
    assert sm["spec"]["namespaceSelector"] == {"any": True}
    (ep,) = sm["spec"]["endpoints"]
    assert ep == {"port": "metrics", "path": "/metrics", "interval": "15s"}
    want = sm["spec"]["selector"]["matchLabels"]
    built = cluster_manifests("demo", "kafka", parse_cluster("demo", {"replicas": 1}), default_image="x")
    services = {m["metadata"]["name"]: m for m in built if m["kind"] == "Service"}
    scraped = [
        n
        for n, s in services.items()
        if want.items() <= s["metadata"]["labels"].items()
        and any(p["name"] == "metrics" for p in s["spec"]["ports"])
    ]
    assert scraped == ["demo-brokers"]  # once per broker: the bootstrap Service has no metrics port
    limited = monitoring(render, *ON, "--set", "monitoring.serviceMonitor.namespaces={kafka,streams}")
    assert limited["ServiceMonitor"]["spec"]["namespaceSelector"] == {"matchNames": ["kafka", "streams"]}


def test_prometheus_rule_carries_the_broker_rules_and_promtool_accepts_them(
    render: Render, tmp_path: Path
) -> None:
    rule = monitoring(render, *ON)["PrometheusRule"]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"] == yaml.safe_load((ASSETS / "alerts.yaml").read_text())
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt-get install -y prometheus)")
    f = tmp_path / "rules.yaml"
    f.write_text(yaml.safe_dump(rule["spec"]))
    p = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_grafana_dashboard_config_map(render: Render, version: str) -> None:
    cm = monitoring(render, *ON, "--set", "monitoring.grafanaDashboard.namespace=grafana")["ConfigMap"]
    kubernetes_validate.validate(cm, version, strict=True)
    assert cm["metadata"]["namespace"] == "grafana"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["brook.json"]) == json.loads((ASSETS / "grafana-dashboard.json").read_text())


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--set", "monitoring.serviceMonitor.interval=often"), "/monitoring/serviceMonitor/interval"),
        (("--set", "monitoring.prometheusRule.unknown=1"), "/monitoring/prometheusRule"),
    ],
)
def test_values_schema_rejects_bad_monitoring_values(
    helm: Helm, args: tuple[str, ...], fragment: str
) -> None:
    p = helm("template", "brook", str(CHART), *args, check=False)
    assert p.returncode != 0
    assert fragment in p.stderr, p.stderr
