"""The emulator's API semantics over raw HTTP, where the clients would hide them: Status bodies,
discovery documents, watch details (selectors, initial events, bookmarks, 410), Table output,
deletion propagation, CRD lifecycle, pod graceful deletion, apply, pagination, dry runs."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.kubeapi.harness import KubeApi

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

JSON = dict[str, Any]


class Http:
    def __init__(self, url: str) -> None:
        self.url = url

    def raw(
        self,
        method: str,
        path: str,
        body: Any = None,
        ctype: str = "application/json",
        accept: str = "application/json",
        timeout: float = 10,
    ) -> tuple[int, dict[str, str], bytes]:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": ctype, "Accept": accept}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def __call__(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        status, _, data = self.raw(method, path, body, **kw)
        return status, json.loads(data) if data else None

    def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        status, doc = self(method, path, body, **kw)
        assert status < 300, (status, doc)
        return doc

    def watch(self, path: str, until: int, timeout: float = 5) -> list[JSON]:
        """Read up to `until` events of a watch (the stream ends by timeoutSeconds otherwise)."""
        req = urllib.request.Request(self.url + path, headers={"Accept": "application/json"})
        events = []
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            for line in resp:
                if line.strip():
                    events.append(json.loads(line))
                if len(events) >= until:
                    break
        return events


CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeApi]:
    with KubeApi.started(tmp_path_factory.mktemp("kubeapi-http"), bookmark_interval=0.3) as k:
        yield k


@pytest.fixture(scope="module")
def http(kube: KubeApi) -> Http:
    return Http(kube.url)


def crd(group: str, plural: str, kind: str, versions: list[str] | None = None, **version_extra: Any) -> JSON:
    names = versions or ["v1"]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind},
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": v == names[-1],
                    **version_extra,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
                for v in names
            ],
        },
    }


def test_health_version_and_errors_as_status(http: Http) -> None:
    for path in ("/healthz", "/readyz", "/livez"):
        assert http.raw("GET", path)[2] == b"ok"
    assert http.ok("GET", "/version")["major"] == "1"

    status, doc = http("GET", CMS + "/missing")
    assert status == 404
    assert doc == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "missing" not found',
        "reason": "NotFound",
        "details": {"name": "missing", "kind": "configmaps"},
        "code": 404,
    }
    http.ok("POST", CMS, {"metadata": {"name": "dup"}})
    status, doc = http("POST", CMS, {"metadata": {"name": "dup"}})
    assert (status, doc["reason"], doc["details"]["name"]) == (409, "AlreadyExists", "dup")
    status, doc = http(
        "POST", "/apis/apps/v1/namespaces/default/deployments", {"metadata": {"name": "d"}, "spec": {}}
    )
    assert status == 422 and doc["reason"] == "Invalid"
    assert doc["message"].startswith('Deployment.apps "d" is invalid: [spec.selector: Required value')
    assert {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.selector"} in doc[
        "details"
    ]["causes"]
    assert http("GET", "/api/v1/nosuchthings")[0] == 404
    assert http("GET", "/apis/nosuch.group/v1")[0] == 404
    status, doc = http("GET", CMS, accept="application/vnd.kubernetes.protobuf")
    assert status == 406 and doc["reason"] == "NotAcceptable"


def test_discovery_legacy_and_aggregated(http: Http) -> None:
    assert http.ok("GET", "/api")["versions"] == ["v1"]
    groups = {g["name"] for g in http.ok("GET", "/apis")["groups"]}
    assert {
        "apps",
        "apiextensions.k8s.io",
        "coordination.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "events.k8s.io",
        "networking.k8s.io",
    } <= groups
    sts = next(r for r in http.ok("GET", "/apis/apps/v1")["resources"] if r["name"] == "statefulsets/scale")
    assert (sts["group"], sts["version"], sts["kind"]) == ("autoscaling", "v1", "Scale")

    agg = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    status, headers, body = http.raw("GET", "/apis", accept=agg)
    assert status == 200 and headers["Content-Type"].startswith("application/json;g=apidiscovery.k8s.io;v=v2")
    doc = json.loads(body)
    assert doc["kind"] == "APIGroupDiscoveryList"
    apps = next(i for i in doc["items"] if i["metadata"]["name"] == "apps")
    sts_agg = next(r for r in apps["versions"][0]["resources"] if r["resource"] == "statefulsets")
    assert {s["subresource"] for s in sts_agg["subresources"]} == {"status", "scale"}

    http.ok(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd("disco.test", "things", "Thing", subresources={"status": {}}),
    )
    assert "disco.test" in {g["name"] for g in http.ok("GET", "/apis")["groups"]}
    assert [r["name"] for r in http.ok("GET", "/apis/disco.test/v1")["resources"]] == [
        "things",
        "things/status",
    ]
    index = http.ok("GET", "/openapi/v3")["paths"]
    assert "apis/disco.test/v1" in index and "api/v1" in index
    spec = http.ok("GET", index["apis/disco.test/v1"]["serverRelativeURL"])
    patch = spec["paths"]["/apis/disco.test/v1/namespaces/{namespace}/things/{name}"]["patch"]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]

    http.ok("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.disco.test")
    wait_gone(http, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.disco.test")
    assert "disco.test" not in {g["name"] for g in http.ok("GET", "/apis")["groups"]}
    assert http("GET", "/apis/disco.test/v1/namespaces/default/things")[0] == 404


def test_watch_selectors_initial_events_and_bookmarks(http: Http) -> None:
    rv = http.ok("GET", CMS)["metadata"]["resourceVersion"]
    http.ok("POST", CMS, {"metadata": {"name": "sel", "labels": {"team": "a"}}})
    http.ok(
        "PATCH", CMS + "/sel", {"metadata": {"labels": {"team": "b"}}}, ctype="application/merge-patch+json"
    )
    http.ok(
        "PATCH", CMS + "/sel", {"metadata": {"labels": {"team": "a"}}}, ctype="application/merge-patch+json"
    )
    events = http.watch(f"{CMS}?watch=true&labelSelector=team%3Da&resourceVersion={rv}&timeoutSeconds=1", 3)
    # leaving the selection is a DELETED, coming back an ADDED
    assert [e["type"] for e in events] == ["ADDED", "DELETED", "ADDED"]
    assert all(e["object"]["metadata"]["name"] == "sel" for e in events)

    events = http.watch(
        f"{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        f"&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dsel&timeoutSeconds=2",
        3,
    )
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK", "BOOKMARK"]
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(events[2]["object"]["metadata"]["resourceVersion"]) >= int(rv)

    http.ok("DELETE", CMS + "/sel")
    events = http.watch(f"{CMS}?watch=true&resourceVersion={rv}&timeoutSeconds=1", 10)
    assert [e["type"] for e in events][-1] == "DELETED"


def test_expired_resource_version_is_an_error_event(kube: KubeApi, http: Http) -> None:
    kube.call(kube.server.store.compact)
    events = http.watch(f"{CMS}?watch=true&resourceVersion=1", 1)
    assert events[0]["type"] == "ERROR"
    assert (events[0]["object"]["code"], events[0]["object"]["reason"]) == (410, "Expired")


def test_table_output(http: Http) -> None:
    http.ok("POST", CMS, {"metadata": {"name": "tbl"}, "data": {"a": "1", "b": "2"}})
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    table = http.ok("GET", CMS + "?fieldSelector=metadata.name%3Dtbl", accept=accept)
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert table["rows"][0]["cells"][:2] == ["tbl", 2]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    table = http.ok("GET", CMS + "/tbl?includeObject=Object", accept=accept)
    assert table["rows"][0]["object"]["data"] == {"a": "1", "b": "2"}


def wait_gone(http: Http, path: str, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while http("GET", path)[0] != 404:
        assert time.monotonic() < deadline, f"{path} still exists"
        time.sleep(0.02)


def test_deletion_propagation_policies(http: Http) -> None:
    def make(name: str, owner: JSON | None = None) -> JSON:
        meta: JSON = {"name": name}
        if owner:
            meta["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "blockOwnerDeletion": True,
                }
            ]
        doc: JSON = http.ok("POST", CMS, {"metadata": meta})
        return doc

    # foreground: the owner waits (foregroundDeletion finalizer) until its dependents are gone
    owner = make("fg-owner")
    make("fg-dep", owner)
    held = http.ok("DELETE", CMS + "/fg-owner", {"propagationPolicy": "Foreground"})
    assert "foregroundDeletion" in held["metadata"]["finalizers"] and held["metadata"]["deletionTimestamp"]
    wait_gone(http, CMS + "/fg-dep")
    wait_gone(http, CMS + "/fg-owner")

    # orphan: dependents stay, without the ownerReference
    owner = make("or-owner")
    make("or-dep", owner)
    http.ok("DELETE", CMS + "/or-owner?propagationPolicy=Orphan")
    wait_gone(http, CMS + "/or-owner")
    assert "ownerReferences" not in http.ok("GET", CMS + "/or-dep")["metadata"]

    # background (default): a chain is collected link by link
    a = make("bg-a")
    b = make("bg-b", a)
    make("bg-c", b)
    status = http.ok("DELETE", CMS + "/bg-a")
    assert status["kind"] == "Status" and status["status"] == "Success"
    wait_gone(http, CMS + "/bg-c")

    # preconditions
    x = make("pre")
    status, doc = http("DELETE", CMS + "/pre", {"preconditions": {"uid": "not-" + x["metadata"]["uid"]}})
    assert status == 409 and doc["reason"] == "Conflict"


def test_crd_deletion_removes_custom_resources(http: Http) -> None:
    http.ok(
        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd("gone.test", "bits", "Bit")
    )
    crs = "/apis/gone.test/v1/namespaces/default/bits"
    http.ok(
        "POST",
        crs,
        {"apiVersion": "gone.test/v1", "kind": "Bit", "metadata": {"name": "b1", "finalizers": ["x/y"]}},
    )
    http.ok("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/bits.gone.test")
    time.sleep(0.2)
    crd_obj = http.ok("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/bits.gone.test")
    assert crd_obj["metadata"]["deletionTimestamp"]
    assert any(c["type"] == "Terminating" for c in crd_obj["status"]["conditions"])
    assert http.ok("GET", crs + "/b1")["metadata"]["deletionTimestamp"]  # waits for the CR's finalizer
    status, _ = http("POST", crs, {"apiVersion": "gone.test/v1", "kind": "Bit", "metadata": {"name": "b2"}})
    assert status == 405
    http.ok("PATCH", crs + "/b1", {"metadata": {"finalizers": None}}, ctype="application/merge-patch+json")
    wait_gone(http, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/bits.gone.test")
    assert http("GET", crs)[0] == 404


def test_multi_version_crd_serves_each_version(http: Http) -> None:
    http.ok(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd("mv.test", "dials", "Dial", versions=["v1beta1", "v1"]),
    )
    http.ok(
        "POST",
        "/apis/mv.test/v1beta1/namespaces/default/dials",
        {"apiVersion": "mv.test/v1beta1", "kind": "Dial", "metadata": {"name": "d"}, "spec": {"x": 1}},
    )
    assert http.ok("GET", "/apis/mv.test/v1/namespaces/default/dials/d")["apiVersion"] == "mv.test/v1"
    assert (
        http.ok("GET", "/apis/mv.test/v1beta1/namespaces/default/dials")["items"][0]["apiVersion"]
        == "mv.test/v1beta1"
    )
    group = next(g for g in http.ok("GET", "/apis")["groups"] if g["name"] == "mv.test")
    assert group["preferredVersion"]["version"] == "v1"


def test_pod_graceful_deletion_once_scheduled(http: Http) -> None:
    pods = "/api/v1/namespaces/default/pods"
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    http.ok("POST", pods, {"metadata": {"name": "unscheduled"}, "spec": spec})
    assert http.ok("DELETE", pods + "/unscheduled")["metadata"]["name"] == "unscheduled"
    assert http("GET", pods + "/unscheduled")[0] == 404

    pod = http.ok("POST", pods, {"metadata": {"name": "p"}, "spec": spec})
    assert pod["status"]["phase"] == "Pending"
    http.ok(
        "POST",
        pods + "/p/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "p"},
            "target": {"kind": "Node", "name": "node-1"},
        },
    )
    assert http.ok("GET", pods + "/p")["spec"]["nodeName"] == "node-1"
    terminating = http.ok("DELETE", pods + "/p")
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 30
    assert http.ok("GET", pods + "/p")["metadata"]["deletionTimestamp"]
    http.ok("DELETE", pods + "/p", {"gracePeriodSeconds": 0})  # what the kubelet sends at the end
    assert http("GET", pods + "/p")[0] == 404


def test_apply_generate_name_dry_run_collection_and_pagination(http: Http) -> None:
    applied = """{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}}"""
    status, doc = http(
        "PATCH", CMS + "/ssa?fieldManager=test", applied.encode(), ctype="application/apply-patch+yaml"
    )
    assert status == 201 and doc["data"] == {"a": "1"}
    doc = http.ok(
        "PATCH",
        CMS + "/ssa?fieldManager=test",
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  b: '2'\n",
        ctype="application/apply-patch+yaml",
    )
    assert doc["data"] == {"a": "1", "b": "2"}

    made = http.ok("POST", CMS, {"metadata": {"generateName": "gen-", "labels": {"batch": "x"}}})
    assert made["metadata"]["name"].startswith("gen-") and len(made["metadata"]["name"]) == 9
    dry = http.ok("POST", CMS + "?dryRun=All", {"metadata": {"name": "dry"}})
    assert dry["metadata"]["name"] == "dry" and http("GET", CMS + "/dry")[0] == 404

    for i in range(5):
        http.ok("POST", CMS, {"metadata": {"name": f"page-{i}", "labels": {"batch": "x"}}})
    page = http.ok("GET", CMS + "?labelSelector=batch%3Dx&limit=4")
    assert len(page["items"]) == 4 and page["metadata"]["remainingItemCount"] == 2
    rest = http.ok("GET", CMS + f"?labelSelector=batch%3Dx&limit=4&continue={page['metadata']['continue']}")
    assert len(rest["items"]) == 2 and "continue" not in rest["metadata"]

    gone = http.ok("DELETE", CMS + "?labelSelector=batch%3Dx")
    assert len(gone["items"]) == 6
    assert http.ok("GET", CMS + "?labelSelector=batch%3Dx")["items"] == []


def test_status_and_generation_rules(http: Http) -> None:
    http.ok(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd("gen.test", "knobs", "Knob", subresources={"status": {}}),
    )
    knobs = "/apis/gen.test/v1/namespaces/default/knobs"
    k = http.ok(
        "POST",
        knobs,
        {
            "apiVersion": "gen.test/v1",
            "kind": "Knob",
            "metadata": {"name": "k"},
            "spec": {"v": 1},
            "status": {"dropped": True},
        },
    )
    assert "status" not in k and k["metadata"]["generation"] == 1
    k["status"] = {"observedGeneration": 1}
    k["spec"] = {"v": "ignored by /status"}
    s = http.ok("PUT", knobs + "/k/status", k)
    assert (
        s["status"] == {"observedGeneration": 1}
        and s["spec"] == {"v": 1}
        and s["metadata"]["generation"] == 1
    )
    same = http.ok("PATCH", knobs + "/k", {"spec": {"v": 1}}, ctype="application/merge-patch+json")
    assert same["metadata"]["resourceVersion"] == s["metadata"]["resourceVersion"]  # a no-op writes nothing
    m = http.ok(
        "PATCH", knobs + "/k", {"metadata": {"labels": {"a": "b"}}}, ctype="application/merge-patch+json"
    )
    assert m["metadata"]["generation"] == 1
    m = http.ok("PATCH", knobs + "/k", {"spec": {"v": 2}}, ctype="application/merge-patch+json")
    assert m["metadata"]["generation"] == 2
    # PUT on a custom resource needs a resourceVersion
    del m["metadata"]["resourceVersion"]
    status, doc = http("PUT", knobs + "/k", m)
    assert status == 422 and "metadata.resourceVersion" in doc["message"]


def test_kubeconfig_points_to_the_emulator(kube: KubeApi) -> None:
    text = Path(kube.kubeconfig).read_text()
    assert kube.url in text and kube.env["KUBECONFIG"] == str(kube.kubeconfig)


def test_namespace_finalize_subresource(http: Http) -> None:
    http.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "fin"}})
    http.ok(
        "POST", "/api/v1/namespaces/fin/configmaps", {"metadata": {"name": "held", "finalizers": ["a/b"]}}
    )
    ns = http.ok("DELETE", "/api/v1/namespaces/fin")
    assert ns["status"]["phase"] == "Terminating" and ns["spec"]["finalizers"] == ["kubernetes"]
    time.sleep(0.1)
    assert http.ok("GET", "/api/v1/namespaces/fin")["status"]["phase"] == "Terminating"  # its content waits
    ns = http.ok("GET", "/api/v1/namespaces/fin")
    ns["spec"]["finalizers"] = []
    http.ok("PUT", "/api/v1/namespaces/fin/finalize", ns)  # forced, as `kubectl replace --raw .../finalize`
    wait_gone(http, "/api/v1/namespaces/fin")
