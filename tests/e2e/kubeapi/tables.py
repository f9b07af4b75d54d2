"""`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`: the server-side printing kubectl get uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .meta import human_age, jsonpath, parse_timestamp
from .resources import Column, ResourceType

JSON = dict[str, Any]
Cell = Callable[[JSON], Any]

NAME_DESC = (
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name automatically. Name is "
    "primarily intended for creation idempotence and configuration definition. Cannot be updated."
)
AGE_DESC = "CreationTimestamp is a timestamp representing the server time when this object was created."


def _col(name: str, typ: str = "string", priority: int = 0, fmt: str = "", desc: str = "") -> JSON:
    return {"name": name, "type": typ, "format": fmt, "description": desc or name, "priority": priority}


def _age(o: JSON) -> str:
    return human_age((o.get("metadata") or {}).get("creationTimestamp"))


def _g(o: JSON, path: str, default: Any = None) -> Any:
    found = jsonpath(o, path)
    return found[0] if found and found[0] is not None else default


def _ready(o: JSON) -> str:
    return f"{_g(o, '.status.readyReplicas', 0)}/{_g(o, '.spec.replicas', 0)}"


def _pod_ready(o: JSON) -> str:
    statuses = _g(o, ".status.containerStatuses", []) or []
    total = len(_g(o, ".spec.containers", []) or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _pod_status(o: JSON) -> str:
    if (o.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    for s in _g(o, ".status.containerStatuses", []) or []:
        waiting = (s.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            return str(waiting["reason"])
    return str(_g(o, ".status.phase", "Pending"))


def _restarts(o: JSON) -> int:
    return sum(int(s.get("restartCount", 0)) for s in _g(o, ".status.containerStatuses", []) or [])


def _ports(o: JSON) -> str:
    ports = _g(o, ".spec.ports", []) or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def _images(o: JSON) -> str:
    return ",".join(c.get("image", "") for c in _g(o, ".spec.template.spec.containers", []) or [])


def _containers(o: JSON) -> str:
    return ",".join(c.get("name", "") for c in _g(o, ".spec.template.spec.containers", []) or [])


BUILTIN_COLUMNS: dict[str, list[tuple[JSON, Cell]]] = {
    "Pod": [
        (_col("Ready", desc="The aggregate readiness state of this pod for accepting traffic."), _pod_ready),
        (_col("Status", desc="The aggregate status of the containers in this pod."), _pod_status),
        (
            _col(
                "Restarts",
                "string",
                desc="The number of times the containers in this pod have been restarted.",
            ),
            _restarts,
        ),
        (_col("Age", desc=AGE_DESC), _age),
        (_col("IP", priority=1), lambda o: _g(o, ".status.podIP", "<none>")),
        (_col("Node", priority=1), lambda o: _g(o, ".spec.nodeName", "<none>")),
    ],
    "StatefulSet": [
        (_col("Ready"), _ready),
        (_col("Age", desc=AGE_DESC), _age),
        (_col("Containers", priority=1), _containers),
        (_col("Images", priority=1), _images),
    ],
    "Deployment": [
        (_col("Ready"), _ready),
        (_col("Up-to-date", "integer"), lambda o: _g(o, ".status.updatedReplicas", 0)),
        (_col("Available", "integer"), lambda o: _g(o, ".status.availableReplicas", 0)),
        (_col("Age", desc=AGE_DESC), _age),
    ],
    "Service": [
        (_col("Type"), lambda o: _g(o, ".spec.type", "ClusterIP")),
        (_col("Cluster-IP"), lambda o: _g(o, ".spec.clusterIP", "<none>")),
        (_col("External-IP"), lambda o: "<none>"),
        (_col("Port(s)"), _ports),
        (_col("Age", desc=AGE_DESC), _age),
    ],
    "ConfigMap": [
        (_col("Data", "integer"), lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {})),
        (_col("Age", desc=AGE_DESC), _age),
    ],
    "Secret": [
        (_col("Type"), lambda o: o.get("type", "Opaque")),
        (_col("Data", "integer"), lambda o: len(o.get("data") or {})),
        (_col("Age", desc=AGE_DESC), _age),
    ],
    "Namespace": [
        (_col("Status"), lambda o: _g(o, ".status.phase", "Active")),
        (_col("Age", desc=AGE_DESC), _age),
    ],
    "PersistentVolumeClaim": [
        (_col("Status"), lambda o: _g(o, ".status.phase", "Pending")),
        (_col("Volume"), lambda o: _g(o, ".spec.volumeName", "")),
        (_col("Capacity"), lambda o: _g(o, ".status.capacity.storage", "")),
        (_col("Age", desc=AGE_DESC), _age),
    ],
    "CustomResourceDefinition": [
        (_col("Created At", "date"), lambda o: (o.get("metadata") or {}).get("creationTimestamp")),
    ],
    "Lease": [
        (_col("Holder"), lambda o: _g(o, ".spec.holderIdentity", "")),
        (_col("Age", desc=AGE_DESC), _age),
    ],
}


def _cell(column: Column, obj: JSON) -> Any:
    found = jsonpath(obj, column.json_path)
    if not found or found[0] is None:
        return None
    value = found[0]
    if column.type == "integer":
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if column.type == "number":
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if column.type == "boolean":
        return value if isinstance(value, bool) else None
    if column.type == "date":
        try:
            parse_timestamp(str(value))
        except ValueError:
            return "<invalid>"
        return human_age(str(value))
    if isinstance(value, (dict, list)):
        import json

        return json.dumps(value, separators=(",", ":"))
    return str(value)


def columns(rt: ResourceType) -> list[tuple[JSON, Cell]]:
    name: list[tuple[JSON, Cell]] = [
        (_col("Name", fmt="name", desc=NAME_DESC), lambda o: (o.get("metadata") or {}).get("name", ""))
    ]
    if not rt.builtin:
        if rt.columns is None:
            return [*name, (_col("Age", "date", desc=AGE_DESC), _age)]
        return name + [
            (
                _col(
                    c.name,
                    c.type if c.type != "date" else "date",
                    c.priority,
                    c.format,
                    c.description or c.name,
                ),
                (lambda o, c=c: _cell(c, o)),
            )
            for c in rt.columns
        ]
    if rt.kind == "Event":
        return [
            (
                _col("Last Seen"),
                lambda o: human_age(
                    o.get("lastTimestamp")
                    or o.get("eventTime")
                    or (o.get("metadata") or {}).get("creationTimestamp")
                ),
            ),
            (_col("Type"), lambda o: o.get("type", "")),
            (_col("Reason"), lambda o: o.get("reason", "")),
            (
                _col("Object"),
                lambda o: "{}/{}".format(
                    str(_g(o, ".involvedObject.kind", _g(o, ".regarding.kind", ""))).lower(),
                    _g(o, ".involvedObject.name", _g(o, ".regarding.name", "")),
                ),
            ),
            (_col("Message"), lambda o: o.get("message", o.get("note", ""))),
        ]
    return name + BUILTIN_COLUMNS.get(rt.kind, [(_col("Age", desc=AGE_DESC), _age)])


def partial(obj: JSON) -> JSON:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata") or {},
    }


def table(rt: ResourceType, objs: list[JSON], include: str, rv: str, with_columns: bool = True) -> JSON:
    cols = columns(rt)
    rows = []
    for obj in objs:
        row: JSON = {"cells": [fn(obj) for _, fn in cols]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = partial(obj)
        rows.append(row)
    out: JSON = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv}}
    if with_columns:
        out["columnDefinitions"] = [c for c, _ in cols]
    out["rows"] = rows
    return out
