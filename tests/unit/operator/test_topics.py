"""Topic reconciliation: decisions, the executor against a fake cluster, resource status, deletion."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from brook_operator import status, topics
from brook_operator.facts import AdminError, TopicState
from brook_operator.spec import TopicSpec
from brook_operator.topics import (
    AlterConfigs,
    Claim,
    CreatePartitions,
    CreateTopic,
    config_drift,
    owner_of,
    plan_delete,
    plan_topic,
)


def spec(**kw: Any) -> TopicSpec:
    base: dict[str, Any] = dict(
        cluster="demo", topic_name="orders", partitions=3, replication_factor=3, config={}
    )
    base.update(kw)
    return TopicSpec(**base)


def state(**kw: Any) -> TopicState:
    base: dict[str, Any] = dict(
        name="orders", topic_id="id-1", partitions=3, replication_factor=3, overrides={}
    )
    base.update(kw)
    return TopicState(**base)


def test_missing_topic_is_created() -> None:
    plan = plan_topic(spec(config={"retention.ms": "1000"}), None)
    assert plan.actions == (CreateTopic("orders", 3, 3, {"retention.ms": "1000"}),)
    assert (plan.ready, plan.reason) == (True, status.RECONCILED)


def test_absent_partitions_and_replication_use_the_cluster_defaults() -> None:
    plan = plan_topic(spec(partitions=None, replication_factor=None), None)
    assert plan.actions == (CreateTopic("orders", None, None, {}),)
    assert plan_topic(spec(partitions=None, replication_factor=None), state(partitions=7)).actions == ()


def test_up_to_date_topic_needs_nothing() -> None:
    plan = plan_topic(spec(), state())
    assert plan.actions == () and plan.ready and plan.message == "topic is up to date"


def test_partitions_are_increased() -> None:
    plan = plan_topic(spec(partitions=6), state())
    assert plan.actions == (CreatePartitions("orders", 6),)
    assert plan.ready and plan.message == "partitions increased to 6"


def test_decreasing_partitions_is_not_supported_but_config_still_applies() -> None:
    plan = plan_topic(spec(partitions=2, config={"retention.ms": "5"}), state())
    assert plan.actions == (AlterConfigs("orders", {"retention.ms": "5"}, ()),)
    assert (plan.ready, plan.reason) == (False, status.NOT_SUPPORTED)
    assert plan.message == "decreasing partitions from 3 to 2 is not supported"


def test_changing_the_replication_factor_is_not_supported() -> None:
    plan = plan_topic(spec(replication_factor=1), state())
    assert (plan.ready, plan.reason) == (False, status.NOT_SUPPORTED)
    assert "replication factor from 3 to 1" in plan.message


def test_renaming_is_not_supported() -> None:
    plan = plan_topic(spec(topic_name="orders-v2"), None, managed_name="orders")
    assert plan.actions == ()
    assert (plan.ready, plan.reason) == (False, status.NOT_SUPPORTED)


def test_config_drift_is_reverted() -> None:
    # desired retention changed out of band, an extra override added out of band
    plan = plan_topic(
        spec(config={"retention.ms": "1000", "cleanup.policy": "compact,delete"}),
        state(overrides={"retention.ms": "99", "cleanup.policy": "delete,compact", "segment.bytes": "1024"}),
    )
    assert plan.actions == (AlterConfigs("orders", {"retention.ms": "1000"}, ("segment.bytes",)),)
    assert plan.ready


def test_equal_spellings_are_not_drift() -> None:
    assert config_drift(
        {
            "cleanup.policy": "compact, delete",
            "unclean.leader.election.enable": "TRUE",
            "retention.ms": "010",
        },
        {"cleanup.policy": "delete,compact", "unclean.leader.election.enable": "true", "retention.ms": "10"},
    ) == ({}, ())
    assert config_drift({"min.cleanable.dirty.ratio": "0.50"}, {"min.cleanable.dirty.ratio": "0.5"}) == (
        {},
        (),
    )


def test_the_older_resource_wins_a_conflict() -> None:
    old = Claim("2024-01-01T00:00:00Z", "orders", "uid-old", "ns")
    new = Claim("2024-02-01T00:00:00Z", "orders-copy", "uid-new", "ns")
    assert owner_of([new, old]) == old
    same_time = Claim("2024-01-01T00:00:00Z", "a-orders", "uid-x", "ns")
    assert owner_of([old, same_time]) == same_time  # then by name
    plan = plan_topic(spec(), state(), conflict=old)
    assert plan.actions == ()
    assert (plan.ready, plan.reason) == (False, status.RESOURCE_CONFLICT)
    assert "ns/orders" in plan.message


@pytest.mark.parametrize(
    ("kw", "delete", "fragment"),
    [
        (dict(keep=False, is_owner=True, cluster_exists=True), True, "deleted"),
        (dict(keep=True, is_owner=True, cluster_exists=True), False, "kept"),
        (dict(keep=False, is_owner=False, cluster_exists=True), False, "older Topic resource"),
        (dict(keep=False, is_owner=True, cluster_exists=False), False, "no longer exists"),
    ],
)
def test_delete_decisions(kw: dict[str, bool], delete: bool, fragment: str) -> None:
    d = plan_delete(topic_name="orders", **kw)
    assert d.delete_topic is delete and fragment in d.message


def test_keep_annotation() -> None:
    assert topics.keep_on_delete({"brook.dev/keep-topic-on-delete": "true"})
    assert topics.keep_on_delete({"brook.dev/keep-topic-on-delete": " True "})
    assert not topics.keep_on_delete({"brook.dev/keep-topic-on-delete": "false"})
    assert not topics.keep_on_delete(None)


class FakeAdmin:
    """A cluster's topics in memory, with Kafka's rules (partitions only grow)."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicState] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.fail: AdminError | None = None

    async def topic(self, name: str) -> TopicState | None:
        if self.fail:
            raise self.fail
        return self.topics.get(name)

    async def create_topic(
        self, name: str, partitions: int | None, replication_factor: int | None, config: Mapping[str, str]
    ) -> None:
        self.calls.append(("create", name, partitions, replication_factor, dict(config)))
        self.topics[name] = TopicState(
            name, f"id-{name}", partitions or 1, replication_factor or 1, dict(config)
        )

    async def create_partitions(self, name: str, total: int) -> None:
        self.calls.append(("partitions", name, total))
        t = self.topics[name]
        assert total > t.partitions
        self.topics[name] = TopicState(name, t.topic_id, total, t.replication_factor, t.overrides)

    async def alter_topic_config(self, name: str, set_: Mapping[str, str], delete: Iterable[str]) -> None:
        self.calls.append(("alter", name, dict(set_), tuple(delete)))
        t = self.topics[name]
        o = {k: v for k, v in t.overrides.items() if k not in set(delete)} | dict(set_)
        self.topics[name] = TopicState(name, t.topic_id, t.partitions, t.replication_factor, o)

    async def delete_topic(self, name: str) -> None:
        self.calls.append(("delete", name))
        self.topics.pop(name, None)


def body(
    name: str = "orders", uid: str = "u1", created: str = "2024-01-01T00:00:00Z", **spec_kw: Any
) -> dict[str, Any]:
    s: dict[str, Any] = {"cluster": "demo", "partitions": 3, "replicationFactor": 1}
    s.update(spec_kw)
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid,
            "creationTimestamp": created,
            "generation": 2,
        },
        "spec": s,
    }


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_reconcile_creates_then_reverts_out_of_band_changes() -> None:
    admin = FakeAdmin()
    st = run(topics.reconcile_resource(body(config={"retention.ms": 1000}), claims=[], admin=admin, now="T"))
    assert st["conditions"][0]["status"] == "True"
    assert st["topicName"] == "orders" and st["partitions"] == 3 and st["topicId"] == "id-orders"
    assert st["observedGeneration"] == 2
    # someone changes the topic with kafka-configs.sh
    t = admin.topics["orders"]
    admin.topics["orders"] = TopicState("orders", t.topic_id, 3, 1, {"retention.ms": "5", "segment.ms": "10"})
    b = body(config={"retention.ms": 1000})
    b["status"] = st
    st2 = run(topics.reconcile_resource(b, claims=[], admin=admin, now="T2"))
    assert admin.topics["orders"].overrides == {"retention.ms": "1000"}
    assert admin.calls[-1] == ("alter", "orders", {"retention.ms": "1000"}, ("segment.ms",))
    assert st2["conditions"][0]["lastTransitionTime"] == "T"  # still Ready: no transition


def test_reconcile_reports_not_supported_for_fewer_partitions() -> None:
    admin = FakeAdmin()
    run(topics.reconcile_resource(body(partitions=6), claims=[], admin=admin, now="T"))
    st = run(topics.reconcile_resource(body(partitions=2), claims=[], admin=admin, now="T"))
    cond = st["conditions"][0]
    assert (cond["status"], cond["reason"]) == ("False", "NotSupported")
    assert st["partitions"] == 6


def test_the_younger_of_two_resources_gets_resource_conflict_and_touches_nothing() -> None:
    admin = FakeAdmin()
    older = body("orders", "u-old", "2024-01-01T00:00:00Z")
    younger = body("orders-again", "u-new", "2024-06-01T00:00:00Z", topicName="orders", partitions=9)
    claims = [topics.claim_of(older), topics.claim_of(younger)]
    run(topics.reconcile_resource(older, claims=claims, admin=admin, now="T"))
    calls = list(admin.calls)
    st = run(topics.reconcile_resource(younger, claims=claims, admin=admin, now="T"))
    assert st["conditions"][0]["reason"] == "ResourceConflict"
    assert "ns/orders" in st["conditions"][0]["message"]
    assert "topicName" not in st
    assert admin.calls == calls
    # deleting the younger resource never deletes the older one's topic
    d = run(topics.delete_resource(younger, claims=claims, admin=admin))
    assert not d.delete_topic and "orders" in admin.topics


def test_cluster_not_found_and_invalid_spec() -> None:
    st = run(topics.reconcile_resource(body(), claims=[], admin=None, now="T"))
    assert st["conditions"][0]["reason"] == "ClusterNotFound"
    bad = body(partitions=0)
    st = run(topics.reconcile_resource(bad, claims=[], admin=FakeAdmin(), now="T"))
    assert st["conditions"][0]["reason"] == "InvalidSpec"


def test_admin_errors_become_conditions() -> None:
    admin = FakeAdmin()
    admin.fail = AdminError("Metadata: timed out", code="_TIMED_OUT", unavailable=True)
    st = run(topics.reconcile_resource(body(), claims=[], admin=admin, now="T"))
    assert st["conditions"][0]["reason"] == "KafkaUnavailable"
    admin.fail = AdminError("policy violation", code="POLICY_VIOLATION")
    st = run(topics.reconcile_resource(body(), claims=[], admin=admin, now="T"))
    assert st["conditions"][0]["reason"] == "KafkaError"


def test_topic_reasons_are_all_used() -> None:
    used = {
        status.RECONCILED,
        status.INVALID_SPEC,
        status.NOT_SUPPORTED,
        status.RESOURCE_CONFLICT,
        status.CLUSTER_NOT_FOUND,
        status.KAFKA_UNAVAILABLE,
        status.KAFKA_ERROR,
    }
    assert used == status.TOPIC_REASONS


def test_delete_removes_the_topic_unless_kept() -> None:
    admin = FakeAdmin()
    b = body()
    run(topics.reconcile_resource(b, claims=[], admin=admin, now="T"))
    kept = body()
    kept["metadata"]["annotations"] = {"brook.dev/keep-topic-on-delete": "true"}
    assert not run(topics.delete_resource(kept, claims=[], admin=admin)).delete_topic
    assert "orders" in admin.topics
    assert run(topics.delete_resource(b, claims=[], admin=admin)).delete_topic
    assert "orders" not in admin.topics
    # the cluster is gone: nothing to do, the finalizer is released
    assert not run(topics.delete_resource(b, claims=[], admin=None)).delete_topic


def test_delete_uses_the_managed_name() -> None:
    admin = FakeAdmin()
    admin.topics["Orders.V1"] = TopicState("Orders.V1", "x", 1, 1, {})
    b = body(topicName="Orders.V1")
    b["status"] = {"topicName": "Orders.V1"}
    run(topics.delete_resource(b, claims=[], admin=admin))
    assert admin.calls == [("delete", "Orders.V1")]
