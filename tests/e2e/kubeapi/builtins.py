"""Defaulting and validation of built-in kinds: the small part of each kind's registry strategy
that clients notice (defaults they read back, immutable fields they trip over)."""

from __future__ import annotations

import base64
import copy
import itertools
from typing import Any

from .errors import FieldError
from .meta import labels_match, parse_label_selector, selector_from_label_selector

JSON = dict[str, Any]

_cluster_ips = itertools.count(10)


def _pod_spec_defaults(spec: JSON) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for c in itertools.chain(spec.get("containers") or [], spec.get("initContainers") or []):
        if not isinstance(c, dict):
            continue
        image = str(c.get("image", ""))
        tag = image.rsplit("/", 1)[-1]
        latest = ":" not in tag or tag.endswith(":latest")
        c.setdefault("imagePullPolicy", "Always" if latest and "@" not in image else "IfNotPresent")
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault("resources", {})
        for p in c.get("ports") or []:
            if isinstance(p, dict):
                p.setdefault("protocol", "TCP")


def _template_defaults(spec: JSON) -> None:
    tmpl = spec.get("template")
    if isinstance(tmpl, dict) and isinstance(tmpl.get("spec"), dict):
        _pod_spec_defaults(tmpl["spec"])


def default(kind: str, obj: JSON) -> None:
    """Idempotent field defaults, applied on every write (the real server defaults on each decode)."""
    spec = obj.get("spec")
    if kind == "StatefulSet" and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault(
            "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"}
        )
        for t in spec.get("volumeClaimTemplates") or []:
            if isinstance(t, dict):
                t.setdefault("apiVersion", "v1")
                t.setdefault("kind", "PersistentVolumeClaim")
                t.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
        _template_defaults(spec)
    elif kind in ("Deployment", "ReplicaSet") and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        if kind == "Deployment":
            spec.setdefault(
                "strategy",
                {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            )
            spec.setdefault("revisionHistoryLimit", 10)
            spec.setdefault("progressDeadlineSeconds", 600)
        _template_defaults(spec)
    elif kind in ("DaemonSet", "Job") and isinstance(spec, dict):
        _template_defaults(spec)
    elif kind == "Pod" and isinstance(spec, dict):
        _pod_spec_defaults(spec)
        spec.setdefault("serviceAccountName", "default")
    elif kind == "Service":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        for p in spec.get("ports") or []:
            if isinstance(p, dict):
                p.setdefault("protocol", "TCP")
                if "port" in p:
                    p.setdefault("targetPort", p["port"])
    elif kind == "PersistentVolumeClaim" and isinstance(spec, dict):
        spec.setdefault("volumeMode", "Filesystem")
    elif kind == "Secret":
        obj.setdefault("type", "Opaque")
        _secret_string_data(obj)


def init_create(kind: str, obj: JSON) -> None:
    """What the registry strategies set once, on create: initial status, allocated fields."""
    meta = obj["metadata"]
    if kind in (
        "Deployment",
        "StatefulSet",
        "ReplicaSet",
        "DaemonSet",
        "Job",
        "CronJob",
        "HorizontalPodAutoscaler",
        "Ingress",
    ):
        obj["status"] = {"replicas": 0, "availableReplicas": 0} if kind == "StatefulSet" else {}
    if kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
    elif kind == "Pod":
        obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    elif kind == "Service":
        spec = obj.setdefault("spec", {})
        if spec.get("clusterIP") is None:
            n = next(_cluster_ips)
            spec["clusterIP"] = f"10.96.{n // 250}.{n % 250 + 1}"
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        obj["status"] = {"loadBalancer": {}}
    elif kind == "PersistentVolumeClaim":
        obj["status"] = {"phase": "Pending"}
    elif kind == "PodDisruptionBudget":
        obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
    default(kind, obj)


def _secret_string_data(obj: JSON) -> None:
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict):
        data = obj.setdefault("data", {})
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()


def default_update(kind: str, old: JSON, new: JSON) -> None:
    if kind == "Service":
        ospec, nspec = old.get("spec") or {}, new.setdefault("spec", {})
        for f in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if f in ospec and not nspec.get(f):
                nspec[f] = copy.deepcopy(ospec[f])
    if kind == "Namespace":
        new["spec"] = copy.deepcopy(old.get("spec") or {})  # spec.finalizers change only via /finalize
    default(kind, new)


def _selector_errors(spec: JSON) -> list[FieldError]:
    sel = spec.get("selector")
    if not isinstance(sel, dict) or not (sel.get("matchLabels") or sel.get("matchExpressions")):
        return [FieldError("spec.selector", "Required value")]
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not labels_match(parse_label_selector(selector_from_label_selector(sel)), labels):
        return [
            FieldError(
                "spec.template.metadata.labels",
                "Invalid value",
                "`selector` does not match template `labels`",
                labels,
                True,
            )
        ]
    return []


def _containers_errors(pod_spec: Any, path: str) -> list[FieldError]:
    if not isinstance(pod_spec, dict):
        return [FieldError(path, "Required value")]
    containers = pod_spec.get("containers")
    if not containers:
        return [FieldError(f"{path}.containers", "Required value")]
    errs = []
    for i, c in enumerate(containers):
        if not isinstance(c, dict) or not c.get("name"):
            errs.append(FieldError(f"{path}.containers[{i}].name", "Required value"))
        if isinstance(c, dict) and not c.get("image"):
            errs.append(FieldError(f"{path}.containers[{i}].image", "Required value"))
    return errs


def validate(kind: str, obj: JSON) -> list[FieldError]:
    spec = obj.get("spec")
    if kind in ("StatefulSet", "Deployment", "ReplicaSet", "DaemonSet"):
        if not isinstance(spec, dict):
            return [FieldError("spec", "Required value")]
        errs = _selector_errors(spec)
        errs += _containers_errors((spec.get("template") or {}).get("spec"), "spec.template.spec")
        if isinstance(spec.get("replicas"), int) and spec["replicas"] < 0:
            errs.append(
                FieldError(
                    "spec.replicas",
                    "Invalid value",
                    "must be greater than or equal to 0",
                    spec["replicas"],
                    True,
                )
            )
        return errs
    if kind == "Pod":
        return _containers_errors(spec, "spec")
    if kind == "Service" and isinstance(spec, dict):
        errs = []
        for i, p in enumerate(spec.get("ports") or []):
            if not isinstance(p, dict) or "port" not in p:
                errs.append(FieldError(f"spec.ports[{i}].port", "Required value"))
        if len(spec.get("ports") or []) > 1:
            for i, p in enumerate(spec["ports"]):
                if isinstance(p, dict) and not p.get("name"):
                    errs.append(FieldError(f"spec.ports[{i}].name", "Required value"))
        return errs
    if kind == "ConfigMap":
        errs = []
        for field_name in ("data", "binaryData"):
            for key in obj.get(field_name) or {}:
                if not key or len(key) > 253 or not all(ch.isalnum() or ch in "-._" for ch in key):
                    errs.append(
                        FieldError(
                            f"{field_name}[{key}]",
                            "Invalid value",
                            "a valid config key must consist of alphanumeric characters, '-', '_' "
                            "or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used "
                            "for validation is '[-._a-zA-Z0-9]+')",
                            key,
                            True,
                        )
                    )
        return errs
    return []


_STS_MUTABLE = {
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
    "revisionHistoryLimit",
}


def validate_update(kind: str, old: JSON, new: JSON) -> list[FieldError]:
    ospec, nspec = old.get("spec") or {}, new.get("spec") or {}
    errs: list[FieldError] = []
    if kind == "StatefulSet":
        changed = {
            k for k in set(ospec) | set(nspec) if k not in _STS_MUTABLE and ospec.get(k) != nspec.get(k)
        }
        if changed:
            errs.append(
                FieldError(
                    "spec",
                    "Forbidden",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                    "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                    "'minReadySeconds' are forbidden",
                )
            )
    if kind in ("Deployment", "ReplicaSet", "DaemonSet") and ospec.get("selector") != nspec.get("selector"):
        errs.append(
            FieldError("spec.selector", "Invalid value", "field is immutable", nspec.get("selector"), True)
        )
    if kind == "Service" and ospec.get("clusterIP") and nspec.get("clusterIP") != ospec.get("clusterIP"):
        errs.append(
            FieldError("spec.clusterIP", "Invalid value", "field is immutable", nspec.get("clusterIP"), True)
        )
    if kind == "PersistentVolumeClaim":
        o = {k: v for k, v in ospec.items() if k != "resources"}
        n = {k: v for k, v in nspec.items() if k != "resources"}
        if o != n:
            errs.append(
                FieldError(
                    "spec",
                    "Forbidden",
                    "spec is immutable after creation except resources.requests and "
                    "volumeAttributesClassName for bound claims",
                )
            )
    if kind == "Secret" and old.get("immutable") and (old.get("data") != new.get("data")):
        errs.append(FieldError("data", "Forbidden", "field is immutable when `immutable` is set"))
    if kind == "ConfigMap" and old.get("immutable") and (old.get("data") != new.get("data")):
        errs.append(FieldError("data", "Forbidden", "field is immutable when `immutable` is set"))
    return errs + validate(kind, new)
