"""`brook-operator rack-init`: the brokers' init container writes its node's rack to a file.

Pods cannot read node labels through the downward API, so this init container (with a token allowed
only `get nodes`) reads the node's topology label and writes it where the broker reads it
(BROOK_RACK_FILE). A node without the label gives an empty file: the broker runs without a rack.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .kube import RACK_INIT_PERMISSIONS, Kube

log = logging.getLogger(__name__)


def rack_of(node: dict[str, object] | None, topology_key: str) -> str:
    meta = (node or {}).get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    value = labels.get(topology_key) if isinstance(labels, dict) else None
    return str(value) if value else ""


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


async def rack_init(node_name: str, topology_key: str, output: Path, kube: Kube | None = None) -> str:
    k = kube or Kube.from_environment(RACK_INIT_PERMISSIONS)
    try:
        node = await k.get("Node", None, node_name)
    finally:
        if kube is None:
            await k.close()
    rack = rack_of(node, topology_key)
    if not rack:
        log.warning("node %s has no label %s: the broker runs without a rack", node_name, topology_key)
    write_atomically(output, rack)
    return rack
