"""kafka_admin against a real `brook broker` process: the operator's one Kafka seam, end to end.

Also reconciles a Topic resource's status through it (create, grow, config drift revert, delete).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brook_operator import topics
from brook_operator.facts import AdminError
from brook_operator.kafka_admin import AdminPool, KafkaAdmin
from tests.support.broker import BrokerProcess
from tests.support.ports import free_port

pytestmark = pytest.mark.slow


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_snapshot_reports_brokers_controller_and_partitions(broker: BrokerProcess) -> None:
    admin = KafkaAdmin(broker.bootstrap)
    run(admin.create_topic("snap", 2, 1, {}))
    snap = run(admin.snapshot())
    assert snap.broker_ids == (0,)
    assert snap.controller_id == 0
    assert snap.cluster_id
    parts = [p for p in snap.partitions if p.topic == "snap"]
    assert [(p.partition, p.replicas, p.isr) for p in parts] == [(0, (0,), (0,)), (1, (0,), (0,))]
    assert snap.under_replicated_partitions == 0


def test_topic_lifecycle(broker: BrokerProcess) -> None:
    admin = KafkaAdmin(broker.bootstrap)
    assert run(admin.topic("life")) is None
    run(admin.create_topic("life", 2, 1, {"retention.ms": "60000"}))
    t = run(admin.topic("life"))
    assert (t.partitions, t.replication_factor, dict(t.overrides)) == (2, 1, {"retention.ms": "60000"})
    assert t.topic_id
    run(admin.create_topic("life", 2, 1, {}))  # already exists: not an error
    run(admin.create_partitions("life", 4))
    run(admin.alter_topic_config("life", {"segment.ms": "3600000"}, ["retention.ms"]))
    t = run(admin.topic("life"))
    assert t.partitions == 4 and dict(t.overrides) == {"segment.ms": "3600000"}
    assert run(admin.min_insync_replicas(["life", "missing"])) == {"life": 1}
    run(admin.delete_topic("life"))
    run(admin.delete_topic("life"))  # already gone: not an error
    assert run(admin.topic("life")) is None


def test_errors_are_admin_errors(broker: BrokerProcess) -> None:
    admin = KafkaAdmin(broker.bootstrap)
    run(admin.create_topic("err", 3, 1, {}))
    with pytest.raises(AdminError) as e:
        run(admin.create_partitions("err", 2))
    assert e.value.code == "INVALID_PARTITIONS" and not e.value.unavailable
    with pytest.raises(AdminError) as e:
        run(admin.create_topic("bad-config", 1, 1, {"retention.ms": "soon"}))
    assert e.value.code == "INVALID_CONFIG"


def test_an_unreachable_cluster_is_unavailable() -> None:
    admin = KafkaAdmin(f"127.0.0.1:{free_port()}", timeout=1.0)
    with pytest.raises(AdminError) as e:
        run(admin.snapshot())
    assert e.value.unavailable


def test_topic_resource_against_a_real_broker(broker: BrokerProcess) -> None:
    admin = AdminPool().get(broker.bootstrap)
    body: dict[str, Any] = {
        "metadata": {
            "name": "orders",
            "namespace": "ns",
            "uid": "u1",
            "creationTimestamp": "2024-01-01T00:00:00Z",
        },
        "spec": {"cluster": "demo", "partitions": 2, "config": {"retention.ms": 86400000}},
    }
    st = run(topics.reconcile_resource(body, claims=[], admin=admin, now="T"))
    assert st["conditions"][0]["status"] == "True", st
    assert (st["topicName"], st["partitions"], st["replicationFactor"]) == ("orders", 2, 1)
    # out of band: someone alters the topic directly
    run(admin.alter_topic_config("orders", {"retention.ms": "5", "cleanup.policy": "compact"}, []))
    body["spec"]["partitions"] = 3
    body["status"] = st
    st = run(topics.reconcile_resource(body, claims=[], admin=admin, now="T2"))
    t = run(admin.topic("orders"))
    assert t.partitions == 3 and dict(t.overrides) == {"retention.ms": "86400000"}
    body["spec"]["partitions"] = 1
    st = run(topics.reconcile_resource(body, claims=[], admin=admin, now="T3"))
    assert st["conditions"][0]["reason"] == "NotSupported"
    assert run(topics.delete_resource(body, claims=[], admin=admin)).delete_topic
    assert run(admin.topic("orders")) is None
