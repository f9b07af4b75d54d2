"""manifests/: valid built-in objects, least-privilege RBAC matching the code, the operator Deployment,
and the Dockerfile the image is built from."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from .rbac import expected, grants
from .support import KUBE_VERSIONS, MANIFESTS, OBJECT_FILES, REPO, load_all

FILES = OBJECT_FILES


def objects() -> dict[str, dict[str, Any]]:
    return {f"{d['kind']}/{d['metadata']['name']}": d for f in FILES for d in load_all(f)}


def test_the_expected_files_exist() -> None:
    assert {p.name for p in FILES} == {"namespace.yaml", "rbac.yaml", "operator.yaml"}
    assert {p.name for p in (MANIFESTS / "examples").glob("*.yaml")} == {
        "cluster.yaml",
        "cluster-secured.yaml",
        "cluster-etcd-tls.yaml",
        "topic.yaml",
        "user.yaml",
    }


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_manifests_are_valid_kubernetes_objects(path: Path, version: str) -> None:
    for doc in load_all(path):
        kubernetes_validate.validate(doc, version, strict=True)


def test_rbac_grants_exactly_what_the_code_uses() -> None:
    objs = objects()
    want = expected(lease_name="brook-operator", rack_role="brook-broker-rack")
    assert grants(objs["ClusterRole/brook-operator"]["rules"]) == want["ClusterRole"]
    assert grants(objs["Role/brook-operator-leader-election"]["rules"]) == want["Role"]
    assert grants(objs["ClusterRole/brook-broker-rack"]["rules"]) == want["RackClusterRole"]
    assert not any(
        "*" in g for grant in grants(objs["ClusterRole/brook-operator"]["rules"]) for g in grant[:3]
    )


def test_bindings_point_at_the_operator_service_account() -> None:
    objs = objects()
    for key in ("ClusterRoleBinding/brook-operator", "RoleBinding/brook-operator-leader-election"):
        assert objs[key]["subjects"] == [
            {"kind": "ServiceAccount", "name": "brook-operator", "namespace": "brook-system"}
        ]
    assert objs["ClusterRoleBinding/brook-operator"]["roleRef"]["name"] == "brook-operator"
    assert (
        objs["RoleBinding/brook-operator-leader-election"]["roleRef"]["name"]
        == "brook-operator-leader-election"
    )


def test_operator_deployment() -> None:
    objs = objects()
    assert "ServiceAccount/brook-operator" in objs
    dep = objs["Deployment/brook-operator"]
    assert dep["metadata"]["namespace"] == "brook-system"
    assert dep["spec"]["replicas"] >= 2  # a standby takes over through the Lease
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "brook-operator"
    assert pod["securityContext"]["runAsNonRoot"] is True
    (c,) = pod["containers"]
    assert c["command"] == ["brook-operator"] and c["args"] == ["run"]
    env = {e["name"]: e for e in c["env"]}
    assert env["BROOK_OPERATOR_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["BROOK_OPERATOR_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["BROOK_OPERATOR_LEASE_NAME"]["value"] == "brook-operator"
    assert env["BROOK_DEFAULT_IMAGE"]["value"] == c["image"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True


def test_operator_flags_exist() -> None:
    """Every BROOK_OPERATOR_* variable the Deployment sets is read by `brook-operator run`."""
    import inspect

    from brook_operator import handlers, main

    source = inspect.getsource(main) + "".join(
        inspect.getsource(m) for m in (handlers.cluster, handlers.topic)
    )
    (c,) = objects()["Deployment/brook-operator"]["spec"]["template"]["spec"]["containers"]
    for e in c["env"]:
        name = e["name"]
        short = name.removeprefix("BROOK_OPERATOR_")
        assert f'"{name}"' in source or f'"{short}"' in source, f"{name} is not read by the operator"


def test_image_tag_matches_the_project_version() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    (c,) = objects()["Deployment/brook-operator"]["spec"]["template"]["spec"]["containers"]
    assert c["image"] == f"ghcr.io/brook-dev/brook:{version}"
    from brook_operator import main

    assert c["image"] == main.DEFAULT_IMAGE


def test_dockerfile_runs_non_root_with_both_commands() -> None:
    text = (REPO / "Dockerfile").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert lines[0].startswith("FROM python:3.12-slim")
    users = [ln for ln in lines if ln.startswith("USER ")]
    assert users and users[-1] == "USER 10001:10001"
    assert "'.[operator,fast]'" in text  # brook and brook-operator entry points, operator dependencies
    assert "COPY operator ./operator" in text and "COPY services ./services" in text
