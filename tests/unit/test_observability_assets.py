"""The alert rules (promtool) and the Grafana dashboard refer only to metrics Brook exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from brook.observability import CONSUMER, FOLLOWER, BrokerMetrics, GroupOffset, assets
from brook.protocol.errors import ErrorCode
from brook.protocol.versions import ApiKey
from tests.unit.test_observability import FakePartition, FakeView, scrape

ASSETS = Path(str(assets()))
METRIC = re.compile(r"\b(brook_[a-z0-9_]+)")
RECORDED = re.compile(r"\b(brook:[a-z0-9_:]+)")


def exported_names() -> set[str]:
    """Every sample name a broker exposes, with every event kind and state section populated."""
    view = FakeView(
        parts=[FakePartition("t", 0, True, [0, 1], [0], 10, 0, 5, 5, 1), FakePartition("t", 1, False)],
        offsets=[GroupOffset("g", "t", 0, 2)],
        connections=1,
    )
    m = BrokerMetrics(view)
    m.on_produce("t", 10, 1)
    m.on_fetch_out("t", 10)
    m.on_fetch_out("t", 10, follower=True)
    m.on_replication_in(10)
    m.on_request(ApiKey.FETCH, CONSUMER, 0.01, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    m.on_request(ApiKey.FETCH, FOLLOWER, 0.01)
    m.on_isr_shrink()
    m.on_isr_expand()
    return {name for name, _ in scrape(m.registry)}


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool is not installed (apt-get install -y prometheus provides it)")
    return path


def test_promtool_checks_the_rules() -> None:
    r = subprocess.run(
        [promtool(), "check", "rules", str(ASSETS / "alerts.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_unit_tests_of_the_alerts() -> None:
    r = subprocess.run(
        [promtool(), "test", "rules", "alerts_test.yaml"],
        cwd=ASSETS,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((ASSETS / "alerts.yaml").read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_the_issue_alerts_exist() -> None:
    alerts = {r["alert"]: r for r in rules() if "alert" in r}
    assert set(alerts) == {
        "BrookUnderReplicatedPartitions",
        "BrookOfflinePartitions",
        "BrookActiveControllerCount",
        "BrookConsumerLagGrowing",
        "BrookOfflineLogDirectory",
    }
    for rule in alerts.values():
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    assert "!= 1" in alerts["BrookActiveControllerCount"]["expr"]


def test_rules_refer_to_exported_or_recorded_metrics() -> None:
    exported = exported_names()
    recorded = {r["record"] for r in rules() if "record" in r}
    for rule in rules():
        assert set(METRIC.findall(rule["expr"])) <= exported, rule
        assert set(RECORDED.findall(rule["expr"])) <= recorded, rule


def dashboard() -> dict[str, Any]:
    d: dict[str, Any] = json.loads((ASSETS / "grafana-dashboard.json").read_text())
    return d


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def test_dashboard_is_a_grafana_dashboard() -> None:
    d = dashboard()
    assert d["uid"] and d["title"] and isinstance(d["schemaVersion"], int)
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in d["templating"]["list"]}
    assert variables == {"datasource", "namespace", "job", "instance"}
    for p in d["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] > 0
    for p in panels():
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert p["targets"], p["title"]
        for t in p["targets"]:
            used = set(re.findall(r"\$(\w+)", t["expr"])) - {"__rate_interval"}
            assert used <= variables, (p["title"], used)


def test_dashboard_queries_refer_to_exported_metrics() -> None:
    exported = exported_names()
    referenced: set[str] = set()
    for p in panels():
        for t in p["targets"]:
            names = set(METRIC.findall(t["expr"]))
            assert names, (p["title"], t["expr"])
            assert names <= exported, (p["title"], names - exported)
            referenced |= names
    # The issue's panels: bytes in/out, messages in, request rate and latency, URP/offline/controller, lag.
    for name in (
        "brook_broker_bytes_in_total",
        "brook_broker_bytes_out_total",
        "brook_broker_messages_in_total",
        "brook_request_total",
        "brook_request_duration_seconds_bucket",
        "brook_under_replicated_partitions",
        "brook_offline_partitions_count",
        "brook_active_controller_count",
        "brook_consumer_group_committed_offset",
        "brook_high_watermark",
    ):
        assert name in referenced, name
    assert any("histogram_quantile(0.99" in t["expr"] for p in panels() for t in p["targets"])


@pytest.mark.parametrize("name", ["alerts.yaml", "grafana-dashboard.json"])
def test_chart_copies_do_not_drift(name: str) -> None:
    """The chart carries copies (Helm reads files inside the chart only); they must stay identical."""
    copy = Path(__file__).resolve().parents[2] / "charts" / "brook" / "files" / name
    if copy.exists():
        assert copy.read_bytes() == (ASSETS / name).read_bytes(), f"{copy} differs from {ASSETS / name}"
