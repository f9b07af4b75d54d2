"""The Cluster reconcile flow against in-memory Kubernetes and Kafka."""

from __future__ import annotations

import asyncio
from typing import Any

from brook_operator import cluster as flow
from brook_operator.facts import BrokerInfo, ClusterSnapshot, PartitionInfo
from brook_operator.resources import names

from .fakes import FakeClusterAdmin, FakeKube

SETTINGS = flow.OperatorSettings(default_image="brook:test")
BROKERS = tuple(BrokerInfo(i, f"demo-broker-{i}", 9092) for i in range(3))


def body(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    b: dict[str, Any] = {
        "apiVersion": "brook.dev/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "demo", "namespace": "kafka", "uid": "uid-1", "generation": 3},
        "spec": spec if spec is not None else {"replicas": 3, "etcd": {"endpoints": ["http://etcd:2379"]}},
    }
    if status is not None:
        b["status"] = status
    return b


def reconcile(kube: FakeKube, admin: FakeClusterAdmin, b: dict[str, Any], now: str = "T") -> dict[str, Any]:
    return asyncio.run(
        flow.reconcile_cluster(b, kube=kube, admin_for=lambda *_: admin, settings=SETTINGS, now=now)
    )


def run_pods(kube: FakeKube, n: int, *, ready: bool = True, revision: str | None = None) -> None:
    """What the StatefulSet controller and kubelet would do: pods from the current template."""
    sts = kube.objects[("StatefulSet", "kafka", "demo-broker")]
    tpl = sts["spec"]["template"]
    for i in range(n):
        ann = dict(tpl["metadata"]["annotations"])
        if revision is not None:
            ann[names.REVISION_ANNOTATION] = revision
        kube.put(
            {
                "kind": "Pod",
                "metadata": {
                    "name": f"demo-broker-{i}",
                    "namespace": "kafka",
                    "labels": dict(tpl["metadata"]["labels"]),
                    "annotations": ann,
                },
                "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
            }
        )


def conditions(st: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in st["conditions"]}


def test_first_pass_creates_every_owned_object_with_owner_references() -> None:
    kube, admin = FakeKube(), FakeClusterAdmin()
    st = reconcile(kube, admin, body())
    created = {(k, n) for (k, _, n) in kube.objects}
    assert created == {
        ("ConfigMap", "demo-config"),
        ("ConfigMap", "demo-server-properties"),
        ("ServiceAccount", "demo-broker"),
        ("Service", "demo-brokers"),
        ("Service", "demo-bootstrap"),
        ("StatefulSet", "demo-broker"),
        ("PodDisruptionBudget", "demo-broker"),
    }
    for obj in kube.objects.values():
        (ref,) = obj["metadata"]["ownerReferences"]
        assert ref == {
            "apiVersion": "brook.dev/v1alpha1",
            "kind": "Cluster",
            "name": "demo",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    assert conditions(st) == {
        "Ready": ("False", "Creating"),
        "Progressing": ("True", "Creating"),
        "Degraded": ("False", "Healthy"),
    }
    assert st["observedGeneration"] == 3
    assert (
        st["labelSelector"]
        == "app.kubernetes.io/name=brook,app.kubernetes.io/instance=demo,app.kubernetes.io/component=broker"
    )
    assert st["replicas"] == 0 and st["readyBrokers"] == 0
    assert st["bootstrapServers"] == "demo-bootstrap.kafka.svc:9092"


def test_a_second_pass_writes_nothing() -> None:
    kube, admin = FakeKube(), FakeClusterAdmin()
    reconcile(kube, admin, body())
    n = len(kube.calls)
    reconcile(kube, admin, body())
    assert [c for c in kube.calls[n:] if c[0] != "delete"] == []


def test_ready_with_metadata_from_the_cluster() -> None:
    kube = FakeKube()
    snap = ClusterSnapshot("cid", 1, BROKERS, (PartitionInfo("t", 0, 0, (0, 1, 2), (0, 1, 2)),))
    admin = FakeClusterAdmin(snap)
    reconcile(kube, admin, body())
    run_pods(kube, 3)
    st = reconcile(kube, admin, body())
    assert conditions(st)["Ready"] == ("True", "Ready")
    assert st["readyBrokers"] == 3 and st["replicas"] == 3
    assert st["registeredBrokers"] == [0, 1, 2] and st["controllerId"] == 1 and st["clusterId"] == "cid"
    assert st["underReplicatedPartitions"] == 0


def test_invalid_spec_writes_nothing() -> None:
    kube = FakeKube()
    st = reconcile(kube, FakeClusterAdmin(), body({"replicas": 0}))
    assert kube.objects == {}
    assert conditions(st)["Ready"] == ("False", "InvalidSpec")
    assert st["observedGeneration"] == 3


def test_scale_down_refused_while_the_departing_broker_holds_replicas() -> None:
    kube = FakeKube()
    snap = ClusterSnapshot("cid", 0, BROKERS, (PartitionInfo("t", 0, 2, (2, 0), (2, 0)),))
    admin = FakeClusterAdmin(snap)
    reconcile(kube, admin, body())
    run_pods(kube, 3)
    st = reconcile(kube, admin, body({"replicas": 2, "etcd": {"endpoints": ["http://etcd:2379"]}}))
    assert kube.objects[("StatefulSet", "kafka", "demo-broker")]["spec"]["replicas"] == 3
    assert conditions(st)["Ready"] == ("False", "ScaleDownBlocked")
    assert "broker 2 holds 1 partition replicas (t-0)" in st["conditions"][0]["message"]
    # once the replicas have moved away, the scale-down goes through
    admin.snapshot_value = ClusterSnapshot("cid", 0, BROKERS, (PartitionInfo("t", 0, 0, (0, 1), (0, 1)),))
    reconcile(kube, admin, body({"replicas": 2, "etcd": {"endpoints": ["http://etcd:2379"]}}))
    assert kube.objects[("StatefulSet", "kafka", "demo-broker")]["spec"]["replicas"] == 2


def test_a_config_change_rolls_one_broker_per_pass() -> None:
    kube = FakeKube()
    snap = ClusterSnapshot("cid", 0, BROKERS, (PartitionInfo("t", 0, 0, (0, 1, 2), (0, 1, 2)),))
    admin = FakeClusterAdmin(snap, {"t": 2})
    reconcile(kube, admin, body())
    run_pods(kube, 3, revision="old")
    st = reconcile(kube, admin, body())
    assert ("delete", "Pod", "demo-broker-2") in kube.calls
    assert ("Pod", "kafka", "demo-broker-2") not in kube.objects
    assert conditions(st)["Progressing"] == ("True", "RollingUpdate")
    assert conditions(st)["Ready"] == ("True", "Ready")  # all three were serving when observed
    # the deleted pod is not back yet: nothing else is restarted
    n = len(kube.calls)
    st = reconcile(kube, admin, body(status=st))
    assert [c for c in kube.calls[n:] if c[1] == "Pod"] == []
    assert conditions(st)["Ready"] == ("False", "BrokersNotReady")
    assert conditions(st)["Degraded"] == ("False", "Healthy")  # a restart during a roll is expected
    progressing = next(c["message"] for c in st["conditions"] if c["type"] == "Progressing")
    assert progressing == "0/2 brokers updated; waiting for 1 pods to be created"
    # the StatefulSet brings it back from the new template and it becomes ready: the next one goes
    run_pods(kube, 3, revision="old")
    sts = kube.objects[("StatefulSet", "kafka", "demo-broker")]
    new_pod = kube.objects[("Pod", "kafka", "demo-broker-2")]
    new_pod["metadata"]["annotations"] = dict(sts["spec"]["template"]["metadata"]["annotations"])
    reconcile(kube, admin, body(status=st))
    assert kube.calls[-1] == ("delete", "Pod", "demo-broker-1")


def test_no_roll_while_kafka_is_unreachable() -> None:
    kube = FakeKube()
    reconcile(kube, FakeClusterAdmin(), body())
    run_pods(kube, 3, revision="old")
    st = reconcile(kube, FakeClusterAdmin(None), body())
    assert not [c for c in kube.calls if c[1] == "Pod"]
    assert conditions(st)["Degraded"] == ("True", "KafkaUnavailable")


def test_managed_etcd_is_built_and_removed_when_no_longer_asked_for() -> None:
    kube, admin = FakeKube(), FakeClusterAdmin()
    reconcile(kube, admin, body({"replicas": 3, "etcd": {"managed": {"replicas": 3}}}))
    assert ("StatefulSet", "kafka", "demo-etcd") in kube.objects
    reconcile(kube, admin, body({"replicas": 3, "etcd": {"endpoints": ["http://external:2379"]}}))
    assert ("StatefulSet", "kafka", "demo-etcd") not in kube.objects
    assert ("Service", "kafka", "demo-etcd") not in kube.objects
    assert ("PodDisruptionBudget", "kafka", "demo-etcd") not in kube.objects


def test_rack_binding_follows_spec_rack_and_is_removed_on_delete() -> None:
    kube, admin = FakeKube(), FakeClusterAdmin()
    spec = {"replicas": 1, "rack": {}}
    reconcile(kube, admin, body(spec))
    crb = kube.objects[("ClusterRoleBinding", None, "brook-rack-kafka-demo")]
    assert crb["roleRef"]["name"] == "brook-broker-rack"
    assert "ownerReferences" not in crb["metadata"]  # cluster-scoped: removed by the delete handler
    asyncio.run(flow.delete_cluster(body(spec), kube=kube))
    assert ("ClusterRoleBinding", None, "brook-rack-kafka-demo") not in kube.objects


def test_objects_of_another_owner_are_reported_not_overwritten() -> None:
    kube, admin = FakeKube(), FakeClusterAdmin()
    kube.put(
        {
            "kind": "ConfigMap",
            "metadata": {
                "name": "demo-config",
                "namespace": "kafka",
                "ownerReferences": [{"uid": "someone-else", "controller": True}],
            },
        }
    )
    st = reconcile(kube, admin, body())
    assert conditions(st)["Ready"] == ("False", "ReconcileFailed")
    assert "controlled by another owner" in st["conditions"][0]["message"]


def test_conditions_keep_their_transition_times_across_passes() -> None:
    kube, admin = FakeKube(), FakeClusterAdmin()
    st = reconcile(kube, admin, body(), now="T1")
    st2 = reconcile(kube, admin, body(status=st), now="T2")
    assert [c["lastTransitionTime"] for c in st2["conditions"]] == ["T1", "T1", "T1"]


def test_pod_states() -> None:
    pods = [
        {
            "metadata": {"name": "demo-broker-1", "annotations": {names.REVISION_ANNOTATION: "r1"}},
            "status": {},
        },
        {
            "metadata": {
                "name": "demo-broker-0",
                "annotations": {names.REVISION_ANNOTATION: "r0"},
                "deletionTimestamp": "x",
            },
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        },
        {"metadata": {"name": "unrelated"}},
    ]
    s = flow.pod_states(pods, "r1")
    assert [(p.name, p.ordinal, p.ready, p.up_to_date, p.terminating) for p in s] == [
        ("demo-broker-0", 0, False, False, True),
        ("demo-broker-1", 1, False, True, False),
    ]
