"""Builders: Cluster spec → manifests (pure, deterministic, valid Kubernetes objects)."""

from __future__ import annotations

import copy
from typing import Any

import javaproperties
import kubernetes_validate
import pytest

from brook_operator import resources
from brook_operator.resources import broker, etcd, names
from brook_operator.spec import ClusterSpec, parse_cluster

IMAGE = "ghcr.io/brook-dev/brook:0.1.0"


def build(
    spec: dict[str, Any], *, name: str = "demo", ns: str = "kafka", **kw: Any
) -> dict[str, dict[str, Any]]:
    ms = resources.cluster_manifests(name, ns, parse_cluster(name, spec), default_image=IMAGE, **kw)
    return {f"{m['kind']}/{m['metadata']['name']}": m for m in ms}


FULL = {
    "replicas": 3,
    "image": "registry.example/brook:1.2",
    "storage": {"size": "20Gi", "storageClassName": "fast", "deleteClaim": True},
    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
    "config": {
        "retention.ms": 86400000,
        "cleanup.policy": "compact,delete",
        "num.partitions": 6,
        "auto.create.topics.enable": False,
        "min.insync.replicas": 2,
    },
    "rack": {"topologyKey": "topology.kubernetes.io/zone"},
    "etcd": {"managed": {"replicas": 3}},
    "listeners": [{"name": "plain", "port": 9093}],
    "metrics": {"port": 9400},
}


def container(sts: dict[str, Any], name: str = "broker") -> dict[str, Any]:
    c: dict[str, Any] = next(c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == name)
    return c


def env(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def test_a_cluster_builds_every_owned_object_in_dependency_order() -> None:
    ms = resources.cluster_manifests("demo", "kafka", parse_cluster("demo", FULL), default_image=IMAGE)
    assert [f"{m['kind']}/{m['metadata']['name']}" for m in ms] == [
        "Service/demo-etcd",
        "StatefulSet/demo-etcd",
        "PodDisruptionBudget/demo-etcd",
        "ConfigMap/demo-config",
        "ConfigMap/demo-server-properties",
        "ServiceAccount/demo-broker",
        "Service/demo-brokers",
        "Service/demo-bootstrap",
        "StatefulSet/demo-broker",
        "PodDisruptionBudget/demo-broker",
    ]
    for m in ms:
        assert m["metadata"]["namespace"] == "kafka"
        labels = m["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "brook"
        assert labels["app.kubernetes.io/instance"] == "demo"
        assert labels["app.kubernetes.io/managed-by"] == "brook-operator"
        assert "ownerReferences" not in m["metadata"]  # added by the handler


def test_without_etcd_or_rack_there_is_no_etcd_and_no_init_container() -> None:
    objs = build({"replicas": 1})
    assert set(objs) == {
        "ConfigMap/demo-config",
        "ConfigMap/demo-server-properties",
        "ServiceAccount/demo-broker",
        "Service/demo-brokers",
        "Service/demo-bootstrap",
        "StatefulSet/demo-broker",
        "PodDisruptionBudget/demo-broker",
    }
    pod = objs["StatefulSet/demo-broker"]["spec"]["template"]["spec"]
    assert "initContainers" not in pod and "topologySpreadConstraints" not in pod
    assert "BROOK_ETCD_ENDPOINTS" not in objs["ConfigMap/demo-config"]["data"]
    assert "BROOK_RACK_FILE" not in env(container(objs["StatefulSet/demo-broker"]))


def test_builders_are_deterministic() -> None:
    spec = parse_cluster("demo", FULL)
    a = resources.cluster_manifests("demo", "kafka", spec, default_image=IMAGE)
    b = resources.cluster_manifests("demo", "kafka", copy.deepcopy(spec), default_image=IMAGE)
    assert a == b
    assert names.stable_hash(a) == names.stable_hash(b)


def test_statefulset_shape() -> None:
    sts = build(FULL)["StatefulSet/demo-broker"]
    s = sts["spec"]
    assert s["serviceName"] == "demo-brokers"
    assert s["replicas"] == 3
    assert s["podManagementPolicy"] == "Parallel"
    assert s["updateStrategy"] == {"type": "OnDelete"}  # the operator rolls, one broker at a time
    assert s["selector"]["matchLabels"] == names.selector("demo", "broker")
    assert s["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "broker"
    (claim,) = s["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "20Gi"}},
        "storageClassName": "fast",
    }
    assert s["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Delete", "whenScaled": "Retain"}
    pod = s["template"]["spec"]
    assert pod["serviceAccountName"] == "demo-broker"
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    c = container(sts)
    assert c["image"] == "registry.example/brook:1.2"
    assert c["command"] == ["brook"]
    assert c["resources"] == {"limits": {"memory": "2Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert {m["mountPath"] for m in c["volumeMounts"]} == {
        "/var/lib/brook",
        "/tmp",
        "/var/run/brook",
        "/etc/brook/config",
    }


def test_probes_use_the_health_endpoints_of_the_metrics_port() -> None:
    c = container(build(FULL)["StatefulSet/demo-broker"])
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] >= 300
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"kafka": 9093, "metrics": 9400}


def test_broker_id_comes_from_the_ordinal_and_the_address_from_the_headless_service() -> None:
    e = env(container(build(FULL)["StatefulSet/demo-broker"]))
    assert e["BROOK_NODE_ID"] == {
        "fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}
    }
    assert e["BROOK_POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert e["BROOK_ADVERTISED_HOST"] == "$(BROOK_POD_NAME).demo-brokers.kafka.svc"
    names_in_order = [x["name"] for x in container(build(FULL)["StatefulSet/demo-broker"])["env"]]
    assert names_in_order.index("BROOK_POD_NAME") < names_in_order.index("BROOK_ADVERTISED_HOST")


def test_ordinal_and_pod_names() -> None:
    assert names.pod("demo", 2) == "demo-broker-2"
    assert names.ordinal_of("demo-broker-2") == 2
    assert names.ordinal_of("my-cluster-broker-17") == 17
    assert names.ordinal_of("demo-broker") is None
    assert names.pod_fqdn("demo", "kafka", 1) == "demo-broker-1.demo-brokers.kafka.svc"


def test_rack_comes_from_an_init_container_reading_the_node_label() -> None:
    sts = build(FULL)["StatefulSet/demo-broker"]
    pod = sts["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    assert init["command"] == ["brook-operator", "rack-init"]
    assert init["args"] == [
        "--node",
        "$(BROOK_NODE_NAME)",
        "--topology-key",
        "topology.kubernetes.io/zone",
        "--output",
        "/var/run/brook/rack",
    ]
    assert env(init)["BROOK_NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    # only the init container gets an API token (projected), never the broker
    assert any(m["name"] == "kube-api-access" for m in init["volumeMounts"])
    assert not any(m["name"] == "kube-api-access" for m in container(sts)["volumeMounts"])
    token = next(v for v in pod["volumes"] if v["name"] == "kube-api-access")
    assert token["projected"]["sources"][0]["serviceAccountToken"]["path"] == "token"
    assert env(container(sts))["BROOK_RACK_FILE"] == "/var/run/brook/rack"
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert spread["labelSelector"]["matchLabels"] == names.selector("demo", "broker")


def test_rack_binding_grants_the_brokers_the_rack_cluster_role() -> None:
    b = resources.rack_binding("demo", "kafka", "brook-broker-rack")
    assert b["kind"] == "ClusterRoleBinding"
    assert b["metadata"]["name"] == "brook-rack-kafka-demo"
    assert "namespace" not in b["metadata"]
    assert b["roleRef"]["name"] == "brook-broker-rack"
    assert b["subjects"] == [{"kind": "ServiceAccount", "name": "demo-broker", "namespace": "kafka"}]


def test_config_goes_to_topic_default_flags_and_a_server_properties() -> None:
    objs = build(FULL)
    c = container(objs["StatefulSet/demo-broker"])
    assert c["args"] == [
        "broker",
        "--config",
        "/etc/brook/config/server.properties",
        "--topic-default",
        "cleanup.policy=compact,delete",
        "--topic-default",
        "min.insync.replicas=2",
        "--topic-default",
        "retention.ms=86400000",
    ]
    properties = objs["ConfigMap/demo-server-properties"]["data"]["server.properties"]
    assert javaproperties.loads(properties) == {"auto.create.topics.enable": "false", "num.partitions": "6"}
    assert {"name": "server-properties", "mountPath": "/etc/brook/config", "readOnly": True} in c[
        "volumeMounts"
    ]
    pod = objs["StatefulSet/demo-broker"]["spec"]["template"]["spec"]
    assert {"name": "server-properties", "configMap": {"name": "demo-server-properties"}} in pod["volumes"]
    data = objs["ConfigMap/demo-config"]["data"]
    assert data == {
        "BROOK_DATA_DIR": "/var/lib/brook/data",
        "BROOK_ETCD_ENDPOINTS": ",".join(f"http://demo-etcd-{i}.demo-etcd.kafka.svc:2379" for i in range(3)),
        "BROOK_HOST": "0.0.0.0",
        "BROOK_LOG_LEVEL": "INFO",
        "BROOK_METRICS_HOST": "0.0.0.0",
        "BROOK_METRICS_PORT": "9400",
        "BROOK_PORT": "9093",
    }
    assert c["envFrom"] == [{"configMapRef": {"name": "demo-config"}}]


def test_a_properties_change_rolls_the_brokers() -> None:
    def revision(config: dict[str, object]) -> str:
        sts = build({**FULL, "config": config})["StatefulSet/demo-broker"]
        return str(sts["spec"]["template"]["metadata"]["annotations"]["brook.dev/config-hash"])

    assert revision({"num.partitions": 6}) != revision({"num.partitions": 7})


def test_external_etcd_endpoints_are_passed_as_they_are() -> None:
    objs = build({"replicas": 3, "etcd": {"endpoints": ["http://a:2379", "https://b:2379"]}})
    assert objs["ConfigMap/demo-config"]["data"]["BROOK_ETCD_ENDPOINTS"] == "http://a:2379,https://b:2379"
    assert not any(k.endswith("demo-etcd") for k in objs)


SECURE_ETCD = {
    "endpoints": ["https://etcd-0.example:2379"],
    "tls": {"caSecret": {"name": "etcd-ca"}, "clientCertificateSecret": "brook-etcd-client"},
    "auth": {"user": "brook", "passwordSecret": {"name": "brook-etcd", "key": "pw"}},
}


def test_etcd_tls_and_auth_secrets_are_mounted_and_named_in_the_config() -> None:
    objs = build({"replicas": 3, "etcd": SECURE_ETCD, "metrics": {"host": "::"}})
    data = objs["ConfigMap/demo-config"]["data"]
    assert {k: v for k, v in data.items() if k.startswith("BROOK_ETCD_") or k == "BROOK_METRICS_HOST"} == {
        "BROOK_ETCD_ENDPOINTS": "https://etcd-0.example:2379",
        "BROOK_ETCD_CACERT": "/etc/brook/etcd/ca/ca.crt",
        "BROOK_ETCD_CERT": "/etc/brook/etcd/client/tls.crt",
        "BROOK_ETCD_KEY": "/etc/brook/etcd/client/tls.key",
        "BROOK_ETCD_USER": "brook",
        "BROOK_ETCD_PASSWORD_FILE": "/etc/brook/etcd/auth/pw",
        "BROOK_METRICS_HOST": "::",
    }
    assert not any(k.endswith("PASSWORD") for k in data)  # the password itself is only a file
    sts = objs["StatefulSet/demo-broker"]
    vols = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert vols["etcd-ca"]["secret"]["secretName"] == "etcd-ca"
    assert vols["etcd-ca"]["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
    assert vols["etcd-client"]["secret"]["secretName"] == "brook-etcd-client"
    assert vols["etcd-auth"]["secret"]["items"] == [{"key": "pw", "path": "pw"}]
    mounts = {m["name"]: m for m in container(sts)["volumeMounts"]}
    for name, path in (("etcd-ca", "ca"), ("etcd-client", "client"), ("etcd-auth", "auth")):
        assert mounts[name] == {"name": name, "mountPath": f"/etc/brook/etcd/{path}", "readOnly": True}
    # The files the ConfigMap names are where the Secrets are mounted.
    for key in ("BROOK_ETCD_CACERT", "BROOK_ETCD_CERT", "BROOK_ETCD_KEY", "BROOK_ETCD_PASSWORD_FILE"):
        directory, _, item = data[key].rpartition("/")
        volume = next(m["name"] for m in mounts.values() if m["mountPath"] == directory)
        assert item in [i["path"] for i in vols[volume]["secret"]["items"]]


def test_plain_etcd_mounts_nothing_for_it() -> None:
    objs = build({"replicas": 3, "etcd": {"endpoints": ["http://e:2379"]}})
    assert not [
        k
        for k in objs["ConfigMap/demo-config"]["data"]
        if k.startswith("BROOK_ETCD_") and "ENDPOINTS" not in k
    ]
    vols = objs["StatefulSet/demo-broker"]["spec"]["template"]["spec"]["volumes"]
    assert not [v for v in vols if v["name"].startswith("etcd-")]


def test_a_config_change_changes_the_pod_revision_and_nothing_else_does() -> None:
    def revision(spec: dict[str, Any], **kw: Any) -> str:
        sts = build(spec, **kw)["StatefulSet/demo-broker"]
        r: str = sts["spec"]["template"]["metadata"]["annotations"][names.REVISION_ANNOTATION]
        return r

    base = revision(FULL)
    changed = copy.deepcopy(FULL)
    changed["config"]["num.partitions"] = 12  # env from the ConfigMap only: the config hash moves
    assert revision(changed) != base
    changed = copy.deepcopy(FULL)
    changed["config"]["retention.ms"] = 1000  # an argument
    assert revision(changed) != base
    changed = copy.deepcopy(FULL)
    changed["replicas"] = 5  # scaling is not a roll
    assert revision(changed) == base
    assert revision(FULL, replicas=2) == base


def test_replicas_override_keeps_the_statefulset_size() -> None:
    assert build(FULL, replicas=5)["StatefulSet/demo-broker"]["spec"]["replicas"] == 5


def test_services() -> None:
    objs = build(FULL)
    headless = objs["Service/demo-brokers"]["spec"]
    assert headless["clusterIP"] == "None"
    assert headless["publishNotReadyAddresses"] is True
    assert headless["selector"] == names.selector("demo", "broker")
    assert {p["name"]: p["port"] for p in headless["ports"]} == {"kafka": 9093, "metrics": 9400}
    boot = objs["Service/demo-bootstrap"]["spec"]
    assert boot["type"] == "ClusterIP"
    assert "publishNotReadyAddresses" not in boot
    assert [p["port"] for p in boot["ports"]] == [9093]
    assert names.bootstrap_address("demo", "kafka", 9093) == "demo-bootstrap.kafka.svc:9093"


def test_pod_disruption_budgets_allow_one_pod_down() -> None:
    objs = build(FULL)
    for key, component in (
        ("PodDisruptionBudget/demo-broker", "broker"),
        ("PodDisruptionBudget/demo-etcd", "etcd"),
    ):
        spec = objs[key]["spec"]
        assert spec == {"maxUnavailable": 1, "selector": {"matchLabels": names.selector("demo", component)}}


def test_service_account_mounts_no_token() -> None:
    assert build(FULL)["ServiceAccount/demo-broker"]["automountServiceAccountToken"] is False


def test_ephemeral_storage_uses_an_empty_dir() -> None:
    sts = build({"replicas": 1, "storage": {"type": "ephemeral", "size": "5Gi"}})["StatefulSet/demo-broker"]
    assert "volumeClaimTemplates" not in sts["spec"]
    assert "persistentVolumeClaimRetentionPolicy" not in sts["spec"]
    vols = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert vols["data"] == {"name": "data", "emptyDir": {"sizeLimit": "5Gi"}}


def test_metrics_disabled_drops_the_scrape_annotations_but_keeps_the_probes() -> None:
    sts = build({"replicas": 1, "metrics": {"enabled": False}})["StatefulSet/demo-broker"]
    ann = sts["spec"]["template"]["metadata"]["annotations"]
    assert "prometheus.io/scrape" not in ann
    assert container(sts)["readinessProbe"]["httpGet"]["path"] == "/readyz"
    on = build({"replicas": 1})["StatefulSet/demo-broker"]["spec"]["template"]["metadata"]["annotations"]
    assert on["prometheus.io/scrape"] == "true" and on["prometheus.io/port"] == "9308"


def test_default_image_is_the_operators() -> None:
    sts = build({"replicas": 1})["StatefulSet/demo-broker"]
    assert container(sts)["image"] == IMAGE


def test_managed_etcd_shape() -> None:
    spec = parse_cluster("demo", FULL)
    assert spec.etcd is not None and spec.etcd.managed is not None
    sts = etcd.statefulset("demo", "kafka", spec.etcd.managed)
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["serviceName"] == "demo-etcd"
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    c = sts["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "quay.io/coreos/etcd:v3.5.17"
    initial = next(a for a in c["args"] if a.startswith("--initial-cluster="))
    assert initial == "--initial-cluster=" + ",".join(
        f"demo-etcd-{i}=http://demo-etcd-{i}.demo-etcd.kafka.svc:2380" for i in range(3)
    )
    assert "--name=$(POD_NAME)" in c["args"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    svc = etcd.service("demo", "kafka")
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True


def test_managed_etcd_refs_name_what_the_builders_make() -> None:
    objs = build(FULL)
    for kind, name in resources.managed_etcd_refs("demo"):
        assert f"{kind}/{name}" in objs


@pytest.mark.parametrize("version", ["1.28.0", kubernetes_validate.latest_version()])
@pytest.mark.parametrize(
    "spec",
    [
        FULL,
        {"replicas": 1},
        {"replicas": 1, "storage": {"type": "ephemeral"}},
        {"replicas": 3, "etcd": {"endpoints": ["http://e:2379"]}},
        {"replicas": 3, "etcd": SECURE_ETCD},
    ],
    ids=["full", "minimal", "ephemeral", "external-etcd", "secure-etcd"],
)
def test_every_built_manifest_is_a_valid_kubernetes_object(spec: dict[str, Any], version: str) -> None:
    ms = resources.cluster_manifests("demo", "kafka", parse_cluster("demo", spec), default_image=IMAGE)
    ms.append(resources.rack_binding("demo", "kafka"))
    for m in ms:
        kubernetes_validate.validate(m, version, strict=True)


def test_a_registry_with_https_and_basic_auth_uses_the_brokers_certificate_and_scram_users() -> None:
    """schemaRegistry.tls: the brokers' certificate (mounted for their TLS listeners, valid for the
    bootstrap Service) serves HTTPS; basicAuth: logins are checked against the SCRAM users. Iceberg's
    schema value mode then needs its own schemaRegistryUrl (no plain-HTTP registry on 127.0.0.1)."""
    listeners = [
        {"name": "plain", "port": 9092},
        {"name": "sasl", "port": 9093, "authentication": "scram-sha-512"},
        {"name": "tls", "port": 9094, "tls": True},
    ]
    registry = {"enabled": True, "tls": True, "basicAuth": True}
    objs = build({"replicas": 1, "listeners": listeners, "schemaRegistry": registry})
    env = objs["ConfigMap/demo-config"]["data"]
    assert env["BROOK_SCHEMA_REGISTRY_SSL_CERTFILE"] == "/etc/brook/tls/tls.crt"
    assert env["BROOK_SCHEMA_REGISTRY_SSL_KEYFILE"] == "/etc/brook/tls/tls.key"
    assert env["BROOK_SCHEMA_REGISTRY_BASIC_AUTH"] == "true"
    assert "BROOK_ICEBERG_SCHEMA_REGISTRY_URL" not in env
    mounts = {m["mountPath"] for m in container(objs["StatefulSet/demo-broker"])["volumeMounts"]}
    assert "/etc/brook/tls" in mounts


def test_a_registry_without_a_plain_listener_reaches_its_broker_over_replication() -> None:
    """Only a SASL_SSL listener: the registry's own client uses the replication listener with the
    broker's certificate (the shape tests/integration/test_schema_registry_tls_only.py runs), and
    basic-auth logins go to the SASL_SSL listener."""
    listeners = [{"name": "secure", "port": 9093, "tls": True, "authentication": "scram-sha-512"}]
    objs = build(
        {"replicas": 1, "listeners": listeners, "schemaRegistry": {"enabled": True, "basicAuth": True}}
    )
    env = objs["ConfigMap/demo-config"]["data"]
    assert env["BROOK_SCHEMA_REGISTRY_BASIC_AUTH"] == "true"
    assert env["BROOK_INTER_BROKER_LISTENER_NAME"] == "REPLICATION"
    assert env["BROOK_LISTENER_SECURITY_PROTOCOL_MAP"] == "SECURE:SASL_SSL,REPLICATION:SSL"
    assert env["BROOK_SSL_KEYSTORE_LOCATION"] and env["BROOK_SSL_TRUSTSTORE_LOCATION"]


def test_pod_revision_ignores_its_own_annotation() -> None:
    tpl = broker.pod_template("demo", "kafka", ClusterSpec(replicas=1), IMAGE, {"A": "1"})
    rev = tpl["metadata"]["annotations"][names.REVISION_ANNOTATION]
    assert broker.pod_revision(tpl) == rev


def test_the_schema_registry_is_served_by_every_broker_behind_the_bootstrap_service() -> None:
    objs = build({"replicas": 1, "schemaRegistry": {"enabled": True, "port": 8085}})
    assert objs["ConfigMap/demo-config"]["data"]["BROOK_SCHEMA_REGISTRY_PORT"] == "8085"
    c = container(objs["StatefulSet/demo-broker"])
    assert {"name": "schema-registry", "containerPort": 8085, "protocol": "TCP"} in c["ports"]
    ports = {p["name"]: p for p in objs["Service/demo-bootstrap"]["spec"]["ports"]}
    assert ports["schema-registry"] == {
        "name": "schema-registry",
        "port": 8085,
        "targetPort": "schema-registry",
        "protocol": "TCP",
    }
    assert "BROOK_SCHEMA_REGISTRY_SSL_CERTFILE" not in objs["ConfigMap/demo-config"]["data"]
    assert "BROOK_SCHEMA_REGISTRY_BASIC_AUTH" not in objs["ConfigMap/demo-config"]["data"]
    off = build({"replicas": 1})
    assert "BROOK_SCHEMA_REGISTRY_PORT" not in off["ConfigMap/demo-config"]["data"]
    assert "schema-registry" not in {p["name"] for p in off["Service/demo-bootstrap"]["spec"]["ports"]}
