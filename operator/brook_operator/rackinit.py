"""The brokers' init containers: `rack-init` writes its node's rack to a file, `advertise` its
advertised listeners.

Pods cannot read node labels through the downward API, so this init container (with a token allowed
only `get nodes`) reads the node's topology label and writes it where the broker reads it
(BROOK_RACK_FILE). A node without the label gives an empty file: the broker runs without a rack.
"""

from __future__ import annotations

import json
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


async def advertise(
    pod: str, table: str, output: Path, node_name: str | None = None, kube: Kube | None = None
) -> str:
    """`brook-operator advertise` (init container): write this broker's advertised.listeners.

    `table` is the operator's table (JSON: broker ordinal -> advertised listeners). A broker whose entry
    is missing (a LoadBalancer's address comes late) fails here: the kubelet retries the init
    container with the ConfigMap's newer value, and the broker never starts advertising an address
    nobody can reach. `{node}` becomes the node's address (nodeport listeners)."""
    from .resources import listeners, names

    ordinal = names.ordinal_of(pod)
    if ordinal is None:
        raise SystemExit(f"advertise: cannot tell the broker ordinal from pod name {pod!r}")
    try:
        entry = json.loads(table or "{}").get(str(ordinal))
    except ValueError as e:
        raise SystemExit(f"advertise: the advertised-listeners table is not JSON: {e}") from e
    if not entry:
        raise SystemExit(f"advertise: broker {ordinal}'s external addresses are not known yet; retrying")
    if listeners.NODE_PLACEHOLDER in entry:
        if node_name is None:
            raise SystemExit("advertise: a nodeport listener needs --node")
        k = kube or Kube.from_environment(RACK_INIT_PERMISSIONS)
        try:
            node = await k.get("Node", None, node_name)
        finally:
            if kube is None:
                await k.close()
        address = listeners.node_address(node)
        if address is None:
            raise SystemExit(f"advertise: node {node_name} has no address")
        entry = listeners.fill_node(entry, address)
    write_atomically(output, entry)
    log.info("broker %d advertises %s", ordinal, entry)
    return str(entry)
