"""Discovery (legacy and aggregated v2) and the OpenAPI v3 documents kubectl reads.

OpenAPI v3 per group-version carries, for every resource, the PATCH operation with the
`fieldValidation` query parameter (kubectl then validates server-side, with fieldValidation=Strict)
and, for custom resources, the CRD's schema under components with x-kubernetes-group-version-kind
(what `kubectl explain` reads). Built-in kinds get no component schema: kubectl then computes
strategic merge patches from its compiled-in types, as it does with an OpenAPI it cannot use.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .resources import GROUP_ORDER, SUB_VERBS, Catalog, ResourceType

JSON = dict[str, Any]

AGG_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGG_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"


def _group_sort(groups: dict[str, list[str]]) -> list[str]:
    def rank(g: str) -> tuple[int, str]:
        return (GROUP_ORDER.index(g) if g in GROUP_ORDER else len(GROUP_ORDER), g)

    return sorted(groups, key=rank)


def api_versions(server_address: str) -> JSON:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def api_group_list(catalog: Catalog) -> JSON:
    groups = []
    gvs = catalog.group_versions()
    for g in _group_sort(gvs):
        if g == "":
            continue
        versions = [{"groupVersion": f"{g}/{v}", "version": v} for v in gvs[g]]
        groups.append({"name": g, "versions": versions, "preferredVersion": versions[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(catalog: Catalog, group: str) -> JSON | None:
    gvs = catalog.group_versions()
    if group not in gvs:
        return None
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in gvs[group]]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions,
        "preferredVersion": versions[0],
    }


def _sub_kind(rt: ResourceType, sub: str) -> tuple[str, str, str]:
    if sub == "scale":
        return ("autoscaling", "v1", "Scale")
    if sub == "binding":
        return ("", "v1", "Binding")
    if sub == "eviction":
        return ("policy", "v1", "Eviction")
    return ("", "", rt.kind)


def _sub_verbs(sub: str) -> list[str]:
    if sub in ("binding", "eviction"):
        return ["create"]
    if sub == "finalize":
        return ["update"]
    return list(SUB_VERBS)


def _storage_hash(rt: ResourceType) -> str:
    return hashlib.sha256(f"{rt.group}/{rt.version}/{rt.kind}".encode()).hexdigest()[:11]


def api_resource_list(catalog: Catalog, group: str, version: str) -> JSON | None:
    rts = sorted(catalog.in_group_version(group, version), key=lambda r: r.plural)
    if not rts:
        return None
    resources: list[JSON] = []
    for rt in rts:
        entry: JSON = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        if "list" in rt.verbs:
            entry["storageVersionHash"] = _storage_hash(rt)
        resources.append(entry)
        for sub in sorted(rt.subresources):
            g, v, k = _sub_kind(rt, sub)
            sentry: JSON = {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": k,
                "verbs": _sub_verbs(sub),
            }
            if g or v:
                sentry["group"], sentry["version"] = g, v
            resources.append(sentry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def aggregated(catalog: Catalog, *, core: bool, v2beta1: bool = False) -> JSON:
    """APIGroupDiscoveryList for /api (core) or /apis (all named groups)."""
    gvs = catalog.group_versions()
    items = []
    for g in _group_sort(gvs):
        if (g == "") != core:
            continue
        versions = []
        for v in gvs[g]:
            resources = []
            for rt in sorted(catalog.in_group_version(g, v), key=lambda r: r.plural):
                entry: JSON = {
                    "resource": rt.plural,
                    "responseKind": {"group": "", "version": "", "kind": rt.kind},
                    "scope": "Namespaced" if rt.namespaced else "Cluster",
                    "singularResource": rt.singular,
                    "verbs": list(rt.verbs),
                }
                if rt.short_names:
                    entry["shortNames"] = list(rt.short_names)
                if rt.categories:
                    entry["categories"] = list(rt.categories)
                subs = []
                for sub in sorted(rt.subresources):
                    sg, sv, sk = _sub_kind(rt, sub)
                    subs.append(
                        {
                            "subresource": sub,
                            "responseKind": {"group": sg, "version": sv, "kind": sk},
                            "verbs": _sub_verbs(sub),
                        }
                    )
                if subs:
                    entry["subresources"] = subs
                resources.append(entry)
            versions.append({"version": v, "resources": resources, "freshness": "Current"})
        items.append({"metadata": {"name": g, "creationTimestamp": None}, "versions": versions})
    api_version = "apidiscovery.k8s.io/v2beta1" if v2beta1 else "apidiscovery.k8s.io/v2"
    return {"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items}


# ---------------------------------------------------------------- OpenAPI v3


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _schema_name(rt: ResourceType) -> str:
    rev = ".".join(reversed(rt.group.split("."))) if rt.group else "io.k8s.api.core"
    return f"{rev}.{rt.version}.{rt.kind}"


_QUERY = [
    ("dryRun", "string"),
    ("fieldManager", "string"),
    ("fieldValidation", "string"),
    ("force", "boolean"),
    ("pretty", "string"),
]


def _operation(rt: ResourceType, action: str, gvk: JSON) -> JSON:
    params = [{"name": n, "in": "query", "schema": {"type": t, "uniqueItems": True}} for n, t in _QUERY]
    return {
        "operationId": f"{action}{rt.kind}",
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
    }


def openapi_v3_gv(catalog: Catalog, group: str, version: str, server_version: str) -> JSON | None:
    rts = catalog.in_group_version(group, version)
    if not rts:
        return None
    paths: JSON = {}
    schemas: JSON = {}
    prefix = "/" + _gv_path(group, version)
    for rt in rts:
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        base = f"{prefix}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{prefix}/{rt.plural}"
        paths[base] = {
            "get": _operation(rt, "list", gvk),
            "post": _operation(rt, "post", gvk),
            "parameters": [
                {"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}
            ]
            if rt.namespaced
            else [],
        }
        item: JSON = {a: _operation(rt, a, gvk) for a in ("get", "put", "patch", "delete")}
        item["parameters"] = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
        paths[f"{base}/{{name}}"] = item
        for sub in sorted(rt.subresources):
            g, v, k = _sub_kind(rt, sub)
            sgvk = {"group": g, "version": v, "kind": k} if (g or v) else gvk
            paths[f"{base}/{{name}}/{sub}"] = {a: _operation(rt, a, sgvk) for a in ("get", "put", "patch")}
        if not rt.builtin and rt.schema:
            body = json.loads(json.dumps(rt.schema))
            props = body.setdefault("properties", {})
            props.setdefault("apiVersion", {"type": "string"})
            props.setdefault("kind", {"type": "string"})
            props["metadata"] = {
                "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
            }
            body["x-kubernetes-group-version-kind"] = [gvk]
            schemas[_schema_name(rt)] = body
    if schemas:
        schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"] = {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "namespace": {"type": "string"},
                "generateName": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                "finalizers": {"type": "array", "items": {"type": "string"}},
                "uid": {"type": "string"},
                "resourceVersion": {"type": "string"},
                "generation": {"type": "integer", "format": "int64"},
                "ownerReferences": {
                    "type": "array",
                    "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            },
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": server_version},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def openapi_v3_index(catalog: Catalog, server_version: str) -> JSON:
    paths: JSON = {}
    gvs = catalog.group_versions()
    for g in _group_sort(gvs):
        for v in gvs[g]:
            doc = openapi_v3_gv(catalog, g, v, server_version)
            digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()
            p = _gv_path(g, v)
            paths[p] = {"serverRelativeURL": f"/openapi/v3/{p}?hash={digest}"}
    return {"paths": paths}
