from __future__ import annotations

import pytest

from brook_operator.apply import (
    OwnershipConflict,
    check_ownership,
    prepare_replace,
    unchanged,
    with_applied_hash,
)
from brook_operator.resources.names import APPLIED_HASH_ANNOTATION


def test_applied_hash_is_stable_and_content_sensitive() -> None:
    m = {"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "1"}}
    a, ha = with_applied_hash(m)
    _, hb = with_applied_hash({"data": {"x": "1"}, "metadata": {"name": "a"}, "kind": "ConfigMap"})
    assert ha == hb and a["metadata"]["annotations"][APPLIED_HASH_ANNOTATION] == ha
    assert "annotations" not in m["metadata"]  # the input is not modified
    assert with_applied_hash({**m, "data": {"x": "2"}})[1] != ha
    assert unchanged(a, ha) and not unchanged(m, ha)


def test_replace_keeps_server_owned_and_immutable_fields() -> None:
    live = {
        "kind": "Service",
        "metadata": {
            "name": "s",
            "resourceVersion": "7",
            "labels": {"other": "x"},
            "annotations": {"a": "1"},
        },
        "spec": {"clusterIP": "10.0.0.9", "clusterIPs": ["10.0.0.9"], "type": "ClusterIP", "ports": []},
    }
    desired = {
        "kind": "Service",
        "metadata": {"name": "s", "labels": {"mine": "y"}},
        "spec": {"type": "ClusterIP", "ports": [1]},
    }
    out = prepare_replace(live, desired)
    assert out["metadata"]["resourceVersion"] == "7"
    assert out["metadata"]["labels"] == {"other": "x", "mine": "y"}
    assert out["metadata"]["annotations"] == {"a": "1"}
    assert out["spec"] == {
        "type": "ClusterIP",
        "ports": [1],
        "clusterIP": "10.0.0.9",
        "clusterIPs": ["10.0.0.9"],
    }


def test_statefulset_replace_keeps_its_immutable_fields() -> None:
    live = {
        "kind": "StatefulSet",
        "metadata": {"name": "b", "resourceVersion": "1"},
        "spec": {
            "volumeClaimTemplates": [{"size": "10Gi"}],
            "selector": {"a": 1},
            "serviceName": "x",
            "replicas": 3,
        },
    }
    desired = {
        "kind": "StatefulSet",
        "metadata": {"name": "b"},
        "spec": {
            "volumeClaimTemplates": [{"size": "20Gi"}],
            "selector": {"a": 1},
            "serviceName": "x",
            "replicas": 4,
        },
    }
    out = prepare_replace(live, desired)
    assert out["spec"]["replicas"] == 4
    assert out["spec"]["volumeClaimTemplates"] == [{"size": "10Gi"}]


def test_objects_controlled_by_another_owner_are_not_overwritten() -> None:
    live = {
        "kind": "Service",
        "metadata": {"name": "s", "ownerReferences": [{"uid": "other", "controller": True}]},
    }
    mine = {
        "kind": "Service",
        "metadata": {"name": "s", "ownerReferences": [{"uid": "me", "controller": True}]},
    }
    with pytest.raises(OwnershipConflict, match="controlled by another owner"):
        check_ownership(live, mine)
    check_ownership({"kind": "Service", "metadata": {"name": "s"}}, mine)  # unowned: adopted
    check_ownership(mine, mine)
