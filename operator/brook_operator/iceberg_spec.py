"""Iceberg topics in the resources (docs/iceberg.md): a Cluster's `spec.iceberg` (the brokers' catalog,
warehouse, extra catalog properties, the registry of the `schema` value mode) and a Topic's
`spec.iceberg` (the topic's brook.iceberg.* configs). Pure: no I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Topic.spec.iceberg field -> the topic config it sets.
TOPIC_FIELDS = {
    "enabled": "brook.iceberg.enabled",
    "namespace": "brook.iceberg.namespace",
    "table": "brook.iceberg.table",
    "commitIntervalMs": "brook.iceberg.commit.interval.ms",
    "valueMode": "brook.iceberg.value.mode",
    "partitionSpec": "brook.iceberg.partition.spec",
}
_CLUSTER_FIELDS = {"catalogUri", "warehouse", "schemaRegistryUrl", "properties", "secretProperties"}
_SECRET_PROPERTY = re.compile(r"^[a-z0-9]+([.-][a-z0-9]+)*$")  # pyiceberg's: s3.secret-access-key, token


@dataclass(frozen=True, slots=True)
class SecretRef:
    """A catalog property's value from a key of a Secret in the Cluster's namespace."""

    name: str
    key: str


@dataclass(frozen=True, slots=True)
class ClusterIceberg:
    catalog_uri: str | None = None  # None: each broker's embedded SQLite catalog (one broker only)
    warehouse: str | None = None
    schema_registry_url: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    secret_properties: Mapping[str, SecretRef] = field(default_factory=dict)

    def secret_env(self) -> list[dict[str, Any]]:
        """The broker container's variables for `secretProperties`: pyiceberg reads a property of the
        catalog named brook from PYICEBERG_CATALOG__BROOK__<NAME> (dots as __, dashes as _), so the
        values come from the Secret straight into the broker, never into a ConfigMap."""
        return [
            {
                "name": "PYICEBERG_CATALOG__BROOK__" + prop.replace(".", "__").replace("-", "_").upper(),
                "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
            }
            for prop, ref in sorted(self.secret_properties.items())
        ]

    def broker_env(self, own_registry_port: int | None) -> dict[str, str]:
        """The brokers' settings (`brook broker` flags as BROOK_* variables). Without a registry URL the
        `schema` value mode uses each broker's own registry when the Cluster serves one."""
        env: dict[str, str] = {}
        if self.catalog_uri:
            env["BROOK_ICEBERG_CATALOG_URI"] = self.catalog_uri
        if self.warehouse:
            env["BROOK_ICEBERG_WAREHOUSE"] = self.warehouse
        registry = self.schema_registry_url or (
            f"http://127.0.0.1:{own_registry_port}" if own_registry_port is not None else None
        )
        if registry:
            env["BROOK_ICEBERG_SCHEMA_REGISTRY_URL"] = registry
        if self.properties:
            env["BROOK_ICEBERG_CATALOG_PROPERTY"] = " ".join(
                f"{k}={v}" for k, v in sorted(self.properties.items())
            )
        return env


def _text(raw: Mapping[str, Any], key: str, path: str, errors: list[str]) -> str | None:
    v = raw.get(key)
    if v is not None and (not isinstance(v, str) or not v or any(c.isspace() for c in v)):
        errors.append(f"{path}.{key} must be a non-empty string without spaces")
        return None
    return v


def parse_cluster_iceberg(raw: Any, path: str, errors: list[str]) -> ClusterIceberg:
    if raw is None:
        return ClusterIceberg()
    if not isinstance(raw, Mapping):
        errors.append(f"{path} must be an object")
        return ClusterIceberg()
    if unknown := set(raw) - _CLUSTER_FIELDS:
        errors.append(f"{path}: unknown fields {', '.join(sorted(unknown))}")
    props = raw.get("properties") or {}
    if not isinstance(props, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and k and not any(c.isspace() for c in k + v)
        for k, v in props.items()
    ):
        errors.append(f"{path}.properties must map names to strings, without spaces")
        props = {}
    return ClusterIceberg(
        _text(raw, "catalogUri", path, errors),
        _text(raw, "warehouse", path, errors),
        _text(raw, "schemaRegistryUrl", path, errors),
        dict(props),
        _secret_properties(raw.get("secretProperties"), f"{path}.secretProperties", set(props), errors),
    )


def _secret_properties(raw: Any, path: str, plain: set[str], errors: list[str]) -> dict[str, SecretRef]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        errors.append(f"{path} must map catalog properties to {{name, key}} of a Secret")
        return {}
    out: dict[str, SecretRef] = {}
    for prop, ref in raw.items():
        if not isinstance(prop, str) or not _SECRET_PROPERTY.match(prop):
            errors.append(f"{path}: '{prop}' is not a catalog property name (lower case, dots, dashes)")
        elif prop in plain:
            errors.append(f"{path}.{prop} is also in properties: give it in one place")
        elif not (
            isinstance(ref, Mapping)
            and set(ref) == {"name", "key"}
            and all(isinstance(v, str) and v for v in ref.values())
        ):
            errors.append(f"{path}.{prop} must be {{name: <Secret>, key: <key in it>}}")
        else:
            out[prop] = SecretRef(ref["name"], ref["key"])
    return out


def topic_configs(raw: Any, path: str, errors: list[str]) -> dict[str, str]:
    """The brook.iceberg.* topic configs a Topic's `spec.iceberg` asks for (checked as configs by the
    caller, with the rest of the topic's configs)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        errors.append(f"{path} must be an object")
        return {}
    if unknown := set(raw) - set(TOPIC_FIELDS):
        errors.append(f"{path}: unknown fields {', '.join(sorted(unknown))}")
    out: dict[str, str] = {}
    for key, name in TOPIC_FIELDS.items():
        v = raw.get(key)
        if v is None:
            continue
        if isinstance(v, bool):
            out[name] = "true" if v else "false"
        elif isinstance(v, int | str):
            out[name] = str(v)
        else:
            errors.append(f"{path}.{key} must be a string, a number or a boolean")
    return out
