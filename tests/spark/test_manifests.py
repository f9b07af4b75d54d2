"""spark-on-k8s/: built-in kinds validated with kubernetes-validate (--strict), SparkApplications against
the Spark Operator CRD schema kept in the repo, and the pieces cross-checked (files, names, versions)."""

from __future__ import annotations

import copy
import os
import re
import subprocess
from typing import Any

import pytest
import yaml

from tests.spark.helpers import ROOT

K8S = ROOT / "spark-on-k8s"
CRD = K8S / "crd" / "sparkapplications.sparkoperator.k8s.io.trimmed.yaml"


def documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((K8S / "manifests").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return out


DOCS = documents()


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The CRD schema as JSON Schema that rejects unknown fields (the API server would prune them)."""
    s = copy.deepcopy(schema)
    for key in [k for k in s if k.startswith("x-kubernetes-")]:
        del s[key]
    if s.get("format") == "int32":
        s.update(minimum=max(s.get("minimum", -(2**31)), -(2**31)), maximum=2**31 - 1)
    s.pop("format", None)
    if "properties" in s:
        s["properties"] = {k: _strict(v) for k, v in s["properties"].items()}
        if s.get("type") == "object" and "additionalProperties" not in s:
            s["additionalProperties"] = False
    if isinstance(s.get("additionalProperties"), dict):
        s["additionalProperties"] = _strict(s["additionalProperties"])
    if "items" in s:
        s["items"] = _strict(s["items"])
    return s


def spark_app_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    schema = _strict(version["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"]["additionalProperties"] = True
    return schema


def test_manifests_present() -> None:
    kinds = sorted({d["kind"] for _, d in DOCS})
    assert kinds == sorted(
        ["Job", "Namespace", "NetworkPolicy", "PersistentVolumeClaim", "Role", "RoleBinding",
         "ServiceAccount", "SparkApplication"]
    )


@pytest.mark.parametrize("name,doc", [d for d in DOCS if d[1]["kind"] != "SparkApplication"],
                         ids=[n for n, d in DOCS if d["kind"] != "SparkApplication"])
def test_builtin_kinds_validate_strict(name: str, doc: dict[str, Any]) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    kv.validate(doc, kv.latest_version(), strict=True)


@pytest.mark.parametrize("name,doc", [d for d in DOCS if d[1]["kind"] == "SparkApplication"],
                         ids=[n for n, d in DOCS if d["kind"] == "SparkApplication"])
def test_spark_applications_match_the_operator_crd(name: str, doc: dict[str, Any]) -> None:
    import jsonschema

    assert doc["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    jsonschema.validate(doc, spark_app_schema())
    spec = doc["spec"]
    # The application file is in the image: local:///opt/brook/<path in this repository>.
    app = spec["mainApplicationFile"]
    assert app.startswith("local:///opt/brook/")
    assert (ROOT / app.removeprefix("local:///opt/brook/")).is_file()
    assert spec["type"] == "Python" and spec["pythonVersion"] == "3" and spec["mode"] == "cluster"
    # Same Spark as the image's pyspark; the service account and claim exist in the manifests.
    arg = re.search(r"ARG PYSPARK_VERSION=(\S+)", (K8S / "Dockerfile").read_text())
    assert arg is not None and spec["sparkVersion"] == arg.group(1)
    accounts = {d["metadata"]["name"] for _, d in DOCS if d["kind"] == "ServiceAccount"}
    assert spec["driver"]["serviceAccount"] in accounts
    claims = {d["metadata"]["name"] for _, d in DOCS if d["kind"] == "PersistentVolumeClaim"}
    for vol in spec.get("volumes", []):
        assert vol["persistentVolumeClaim"]["claimName"] in claims
    mounted = {m["name"] for part in ("driver", "executor") for m in spec[part].get("volumeMounts", [])}
    assert mounted <= {v["name"] for v in spec.get("volumes", [])}


def test_crd_schema_rejects_mistakes() -> None:
    import jsonschema

    good = next(d for _, d in DOCS if d["kind"] == "SparkApplication")
    schema = spark_app_schema()
    for mutate in (
        lambda s: s["spec"].update(type="Pyhton"),
        lambda s: s["spec"]["executor"].update(instances=0),
        lambda s: s["spec"].pop("mainApplicationFile"),
        lambda s: s["spec"]["driver"].update(memmory="1g"),
        lambda s: s["spec"]["sparkConf"].update({"spark.x": 1}),
    ):
        bad = copy.deepcopy(good)
        mutate(bad)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_rbac_lets_the_driver_manage_executors() -> None:
    (role,) = [d for _, d in DOCS if d["kind"] == "Role"]
    granted = {(res, verb) for rule in role["rules"] for res in rule["resources"] for verb in rule["verbs"]}
    for res in ("pods", "services", "configmaps", "persistentvolumeclaims"):
        for verb in ("create", "get", "list", "watch", "delete"):
            assert (res, verb) in granted
    (binding,) = [d for _, d in DOCS if d["kind"] == "RoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == "spark"
    policies = [d for _, d in DOCS if d["kind"] == "NetworkPolicy"]
    assert any(p["spec"].get("policyTypes") == ["Ingress", "Egress"] and "ingress" not in p["spec"]
               for p in policies), "a default-deny policy for the Spark pods"
    egress_ports = {port["port"] for p in policies for rule in p["spec"].get("egress", [])
                    for port in rule.get("ports", [])}
    assert {53, 9092, 443} <= egress_ports


def test_dockerfile_has_a_python_that_pyspark_4_3_supports() -> None:
    text = (K8S / "Dockerfile").read_text()
    base = re.search(r"^FROM python:(\d+)\.(\d+)", text, re.M)
    assert base is not None and (int(base.group(1)), int(base.group(2))) >= (3, 11)
    assert "openjdk-17" in text and '"pandas>=2.2,<3"' in text and "confluent-kafka" in text
    assert "pyarrow" in text and "pip install ." in text
    assert "ENTRYPOINT" in text and (K8S / "entrypoint.sh").is_file()


def test_scripts_parse_and_submit_builds_a_k8s_cluster_mode_command() -> None:
    for script in ("entrypoint.sh", "submit.sh"):
        subprocess.run(["bash", "-n", str(K8S / script)], check=True)
        assert os.access(K8S / script, os.X_OK)
    out = subprocess.run(
        [str(K8S / "submit.sh"), "streaming"], check=True, capture_output=True, text=True,
        env=dict(os.environ, DRY_RUN="1", K8S_API="https://10.0.0.1:6443", PATH="/usr/bin:/bin"),
    ).stdout
    assert "--master k8s://https://10.0.0.1:6443" in out and "--deploy-mode cluster" in out
    assert "spark.kubernetes.authenticate.driver.serviceAccountName=spark" in out
    assert "local:///opt/brook/spark-on-k8s/jobs/page_view_counts.py" in out
