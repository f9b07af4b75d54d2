"""A pod's volumes as local directories (the kubelet's volume manager, for one host).

- `prepare`: a directory per volume: a PVC's under `<workdir>/volumes/<ns>/<claim>` (it outlives the
  pod, as a PersistentVolume does), a hostPath's under `<workdir>/hostpath/`, the rest per pod
  instance; downwardAPI files and the projected service-account token written at once.
- `write_config_files`: the files of configMap and secret volumes (plain or projected), written
  atomically and only when changed, so a process reloading them never reads half a file; a missing
  object holds the containers back, as a kubelet does.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .podspec import field_ref

JSON = dict[str, Any]


def write_if_changed(target: Path, text: str) -> None:
    """Atomically (as the kubelet's atomic writer): a reader never sees half a certificate."""
    if target.exists() and target.read_text() == text:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


def _downward(pod: Mapping[str, Any], items: list[JSON]) -> dict[str, str]:
    out = {}
    for item in items:
        ref = item.get("fieldRef")
        if ref is not None:
            out[str(item["path"])] = field_ref(pod, str(ref["fieldPath"]))
    return out


def prepare(pod: Mapping[str, Any], workdir: Path, pod_dir: Path, token: str) -> dict[str, Path]:
    """Volume name → its local directory, created, with its downwardAPI and token files."""
    namespace = str(pod["metadata"]["namespace"])
    dirs: dict[str, Path] = {}
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        name = str(vol["name"])
        if "persistentVolumeClaim" in vol:
            d = workdir / "volumes" / namespace / str(vol["persistentVolumeClaim"]["claimName"])
        elif "hostPath" in vol:
            d = workdir / "hostpath" / str(vol["hostPath"].get("path", "")).strip("/")
        else:
            d = pod_dir / "volumes" / name
        d.mkdir(parents=True, exist_ok=True)
        dirs[name] = d
        files: dict[str, str] = {}
        if "downwardAPI" in vol:
            files.update(_downward(pod, vol["downwardAPI"].get("items") or []))
        for src in (vol.get("projected") or {}).get("sources") or []:
            if "serviceAccountToken" in src:
                files[str(src["serviceAccountToken"].get("path", "token"))] = token
            if "downwardAPI" in src:
                files.update(_downward(pod, src["downwardAPI"].get("items") or []))
            if "configMap" in src:
                for item in src["configMap"].get("items") or []:
                    files[str(item["path"])] = ""  # filled at launch if the ConfigMap exists
        for path, text in files.items():
            target = d / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    return dirs


def write_config_files(
    pod: Mapping[str, Any],
    dirs: Mapping[str, Path],
    config_maps: Mapping[str, JSON],
    secrets: Mapping[str, JSON],
) -> list[str]:
    """The configMap and secret files of `pod`'s volumes, from the objects as they are now; answers
    the missing objects a volume needs (not `optional`): a kubelet keeps such a pod's containers in
    ContainerCreating until they exist (Spark creates its driver's ConfigMap after the pod)."""
    missing: list[str] = []
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        d = dirs.get(str(vol["name"]))
        if d is None:
            continue
        sources: list[tuple[str, JSON]] = []
        if "configMap" in vol:
            sources.append(("configMap", vol["configMap"]))
        if "secret" in vol:
            sources.append(("secret", vol["secret"]))
        for src in (vol.get("projected") or {}).get("sources") or []:
            for kind in ("configMap", "secret"):
                if kind in src:
                    sources.append((kind, src[kind]))
        for kind, ref in sources:
            name = str(ref.get("name") or ref.get("secretName") or "")
            obj = (config_maps if kind == "configMap" else secrets).get(name)
            if obj is None:
                if not ref.get("optional"):
                    missing.append(f'{kind.lower()} "{name}" not found')
                continue
            data = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
            if kind == "secret":
                data = {k: base64.b64decode(v).decode() for k, v in data.items()}
            items = ref.get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                if str(item["key"]) in data:
                    write_if_changed(d / str(item["path"]), data[str(item["key"])])
    return missing
