"""The `kubernetes` Python client against the emulator: CRUD, list+watch, conflicts, subresources."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.e2e.kubeapi.harness import KubeApi

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.client.test"},
    "spec": {
        "group": "client.test",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1, "default": 3},
                                    "color": {"type": "string"},
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "phase": {"type": "string"},
                                    "observedGeneration": {"type": "integer"},
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture(scope="module")
def api(kubeapi: KubeApi) -> Any:
    return kubeapi.client()


@pytest.fixture(scope="module")
def ns(api: Any) -> str:
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "client-test"}})
    return "client-test"


@pytest.fixture(scope="module")
def gadgets(api: Any) -> Any:
    client.ApiextensionsV1Api(api).create_custom_resource_definition(CRD)
    return client.CustomObjectsApi(api)


def test_configmap_crud_and_errors(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    cm = core.create_namespaced_config_map(
        ns, {"metadata": {"name": "c1", "labels": {"app": "x"}}, "data": {"k": "v"}}
    )
    assert cm.metadata.uid and cm.metadata.resource_version and cm.metadata.creation_timestamp
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "c1"}})
    assert e.value.status == 409 and '"reason":"AlreadyExists"' in e.value.body

    got = core.read_namespaced_config_map("c1", ns)
    got.data["k"] = "v2"
    updated = core.replace_namespaced_config_map("c1", ns, got)
    assert int(updated.metadata.resource_version) > int(cm.metadata.resource_version)

    # a stale resourceVersion on PUT is a 409 Conflict
    got.data["k"] = "v3"
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("c1", ns, got)
    assert e.value.status == 409 and '"reason":"Conflict"' in e.value.body

    patched = core.patch_namespaced_config_map("c1", ns, {"data": {"k2": "x"}})
    assert patched.data == {"k": "v2", "k2": "x"}

    assert [c.metadata.name for c in core.list_namespaced_config_map(ns, label_selector="app=x").items] == [
        "c1"
    ]
    assert core.list_namespaced_config_map(ns, label_selector="app!=x").items == []
    assert [
        c.metadata.name for c in core.list_namespaced_config_map(ns, field_selector="metadata.name=c1").items
    ] == ["c1"]

    core.delete_namespaced_config_map("c1", ns)
    with pytest.raises(ApiException) as e:
        core.read_namespaced_config_map("c1", ns)
    assert e.value.status == 404 and '"reason":"NotFound"' in e.value.body

    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map("no-such-ns", {"metadata": {"name": "c1"}})
    assert e.value.status == 404

    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "Bad_Name"}})
    assert e.value.status == 422 and "metadata.name" in e.value.body


def test_list_then_watch_from_resource_version(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "w0"}})
    listed = core.list_namespaced_config_map(ns)
    rv = listed.metadata.resource_version
    assert "w0" in [c.metadata.name for c in listed.items]

    def writer() -> None:
        time.sleep(0.2)
        core.create_namespaced_config_map(ns, {"metadata": {"name": "w1"}})
        core.patch_namespaced_config_map("w1", ns, {"data": {"a": "b"}})
        core.delete_namespaced_config_map("w1", ns)

    t = threading.Thread(target=writer)
    t.start()
    seen: list[tuple[str, str]] = []
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=5):
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "DELETED":
            w.stop()
    t.join()
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]

    # a watch from the list's resourceVersion replays what happened since
    replayed = [
        (e["type"], e["object"].metadata.name)
        for e in watch.Watch().stream(
            core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=1
        )
    ]
    assert replayed == seen


def test_watch_bookmarks_and_expired_resource_version(kube_api_factory: Any) -> None:
    kube = kube_api_factory(bookmark_interval=0.2, history=3)
    api = kube.client()
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    resp = core.list_namespaced_config_map(
        "default",
        watch=True,
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=1,
        _preload_content=False,
    )
    lines = [ln for ln in resp.read().decode().splitlines() if ln]
    assert lines and all('"type":"BOOKMARK"' in ln for ln in lines)
    for i in range(5):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"h{i}"}})
    with pytest.raises(ApiException) as e:
        for _ in watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=2
        ):
            pass
    assert e.value.status == 410


def test_custom_resource_status_subresource_and_generation(api: Any, ns: str, gadgets: Any) -> None:
    g = gadgets.create_namespaced_custom_object(
        "client.test",
        "v1",
        ns,
        "gadgets",
        {
            "apiVersion": "client.test/v1",
            "kind": "Gadget",
            "metadata": {"name": "g1"},
            "spec": {"color": "red", "unknown": 1},
            "status": {"phase": "ignored on create"},
        },
    )
    assert g["spec"] == {"color": "red", "size": 3}  # pruned and defaulted
    assert "status" not in g and g["metadata"]["generation"] == 1

    s = gadgets.patch_namespaced_custom_object_status(
        "client.test", "v1", ns, "gadgets", "g1", {"status": {"phase": "Ready", "observedGeneration": 1}}
    )
    assert s["status"]["phase"] == "Ready" and s["metadata"]["generation"] == 1  # status: no new generation

    m = gadgets.patch_namespaced_custom_object(
        "client.test",
        "v1",
        ns,
        "gadgets",
        "g1",
        {"spec": {"size": 5}, "status": {"phase": "ignored on the main resource"}},
    )
    assert m["metadata"]["generation"] == 2 and m["status"]["phase"] == "Ready"

    with pytest.raises(ApiException) as e:
        gadgets.patch_namespaced_custom_object(
            "client.test", "v1", ns, "gadgets", "g1", {"spec": {"size": 0}}
        )
    assert e.value.status == 422 and "spec.size" in e.value.body

    stale = dict(g)
    stale["spec"] = {"size": 7}
    with pytest.raises(ApiException) as e:
        gadgets.replace_namespaced_custom_object("client.test", "v1", ns, "gadgets", "g1", stale)
    assert e.value.status == 409

    # JSON patch with a failing test op: 422, as kopf relies on
    with pytest.raises(ApiException) as e:
        gadgets.patch_namespaced_custom_object(
            "client.test",
            "v1",
            ns,
            "gadgets",
            "g1",
            [
                {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
                {"op": "add", "path": "/metadata/finalizers", "value": ["x"]},
            ],
            _content_type="application/json-patch+json",
        )
    assert e.value.status == 422


def test_finalizers_delay_deletion(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "f1", "finalizers": ["test/hold"]}})
    core.delete_namespaced_config_map("f1", ns)
    held = core.read_namespaced_config_map("f1", ns)
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("f1", ns, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as e:
        core.read_namespaced_config_map("f1", ns)
    assert e.value.status == 404


def test_owner_references_garbage_collection(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    core.create_namespaced_config_map(ns, {"metadata": {"name": "dep", "ownerReferences": [ref]}})
    core.delete_namespaced_config_map("owner", ns)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            core.read_namespaced_config_map("dep", ns)
        except ApiException as e:
            assert e.status == 404
            return
        time.sleep(0.05)
    raise AssertionError("the dependent was not garbage-collected")


def test_statefulset_scale_subresource(api: Any, ns: str) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_stateful_set(
        ns,
        {
            "metadata": {"name": "s1"},
            "spec": {
                "serviceName": "s1",
                "selector": {"matchLabels": {"app": "s1"}},
                "template": {
                    "metadata": {"labels": {"app": "s1"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            },
        },
    )
    scale = apps.read_namespaced_stateful_set_scale("s1", ns)
    assert scale.spec.replicas == 1 and scale.status.selector == "app=s1"
    apps.patch_namespaced_stateful_set_scale("s1", ns, {"spec": {"replicas": 4}})
    assert apps.read_namespaced_stateful_set("s1", ns).spec.replicas == 4
    with pytest.raises(ApiException) as e:
        apps.patch_namespaced_stateful_set("s1", ns, {"spec": {"serviceName": "other"}})
    assert e.value.status == 422 and "Forbidden" in e.value.body
