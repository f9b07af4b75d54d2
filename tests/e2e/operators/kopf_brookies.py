"""A tiny kopf operator for the emulator's end-to-end test (`kopf run --standalone -A THIS_FILE`).

Brookie (e2e.brook.test/v1): on create, an owned ConfigMap `<name>-config` with data.size and
status.phase=Ready; on a spec.size change, the ConfigMap follows; on delete (kopf's finalizer),
a line in the unowned ConfigMap `brookie-audit`.
"""

from __future__ import annotations

from typing import Any

import kopf
import kubernetes

GROUP, VERSION, PLURAL = "e2e.brook.test", "v1", "brookies"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.watching.server_timeout = 30
    settings.persistence.finalizer = "e2e.brook.test/finalizer"
    kubernetes.config.load_kube_config()


@kopf.on.create(GROUP, VERSION, PLURAL)
def create_fn(
    spec: Any, name: str, namespace: str, body: kopf.Body, patch: kopf.Patch, **_: Any
) -> dict[str, str]:
    cm: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-config"},
        "data": {"size": str(spec.get("size"))},
    }
    kopf.adopt(cm)
    kubernetes.client.CoreV1Api().create_namespaced_config_map(namespace, cm)
    patch.status["phase"] = "Ready"
    kopf.info(body, reason="Created", message=f"ConfigMap {cm['metadata']['name']} created")
    return {"configmap": cm["metadata"]["name"]}


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec.size")
def resize_fn(new: Any, name: str, namespace: str, **_: Any) -> None:
    kubernetes.client.CoreV1Api().patch_namespaced_config_map(
        f"{name}-config", namespace, {"data": {"size": str(new)}}
    )


@kopf.on.delete(GROUP, VERSION, PLURAL)
def delete_fn(name: str, namespace: str, **_: Any) -> None:
    core = kubernetes.client.CoreV1Api()
    try:
        core.patch_namespaced_config_map("brookie-audit", namespace, {"data": {name: "deleted"}})
    except kubernetes.client.ApiException as e:
        if e.status != 404:
            raise
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "brookie-audit"}, "data": {name: "deleted"}}
        )
