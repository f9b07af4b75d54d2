"""The pod runner's node-agent decisions for a real control plane (tests/e2e/podrunner/node.py): pure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.podrunner import node


def _claim(name: str, uid: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "spec": {"resources": {"requests": {"storage": "2Gi"}}, "storageClassName": "standard"},
        "status": status or {"phase": "Pending"},
    }


def test_a_pending_claim_gets_one_volume_pre_bound_to_it() -> None:
    claim = _claim("data-x-0", "u1")
    pv = node.persistent_volume(claim, Path("/v/ns/data-x-0"))
    assert pv["spec"]["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "ns",
        "name": "data-x-0",
        "uid": "u1",
    }
    assert pv["spec"]["capacity"] == {"storage": "2Gi"} and pv["spec"]["storageClassName"] == "standard"
    assert pv["spec"]["hostPath"]["path"] == "/v/ns/data-x-0"
    assert node.claims_to_provision([claim], []) == [claim]
    assert node.claims_to_provision([claim], [pv]) == []  # already provisioned, not yet bound
    assert node.claims_to_provision([_claim("b", "u2", phase="Bound")], []) == []


def test_only_released_volumes_of_this_provisioner_are_deleted() -> None:
    ours = node.persistent_volume(_claim("a", "u1"), Path("/v"))
    ours["status"] = {"phase": "Released"}
    bound = node.persistent_volume(_claim("b", "u2"), Path("/v"))
    bound["status"] = {"phase": "Bound"}
    theirs = {"metadata": {"name": "other"}, "status": {"phase": "Released"}}
    assert node.released([ours, bound, theirs]) == ["pvc-u1"]


def test_token_requests_are_bound_to_the_pod() -> None:
    pod = {"metadata": {"name": "p", "uid": "u"}}
    req = node.token_request(pod, {"expirationSeconds": 600, "audience": "vault"})
    assert req["spec"] == {
        "expirationSeconds": 600,
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"},
        "audiences": ["vault"],
    }
    assert "audiences" not in node.token_request(pod, {})["spec"]  # the API server's own audience


def test_node_status_is_ready_with_room_for_pods() -> None:
    status = node.node_status("n", "2026-01-01T00:00:01Z", "2026-01-01T00:00:00Z")
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["lastHeartbeatTime"] == "2026-01-01T00:00:01Z"
    assert int(status["allocatable"]["pods"]) > 100
