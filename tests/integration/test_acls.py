"""ACLs with real clients: confluent-kafka's AdminClient creates, describes and deletes them, and users
authenticated with SASL/SCRAM get Kafka's answers for what their ACLs do not allow.

One broker with two listeners: PLAINTEXT, whose ANONYMOUS principal is a super user (the admin path,
as Kafka setups with a plaintext inter-broker listener do), and SASL_PLAINTEXT for the users."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka.protocol.admin import DescribeAclsRequest
from kafka.protocol.producer import InitProducerIdRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from scramp import ScramClient

from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster, eventually
from tests.support.ports import free_port
from tests.support.raw import RawClient

USERS = {"alice": "alice-secret", "admin": "admin-secret", "dave": "dave-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SECURED = ["--authorizer-class-name", AUTHORIZER, "--super-users", "User:admin;User:ANONYMOUS"]


@dataclass
class Env:
    broker: BrokerProcess
    sasl_port: int

    @property
    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.broker.bootstrap})

    def user(self, name: str, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": name,
            "sasl.password": USERS[name],
            **extra,
        }


def _listeners(port: int, sasl_port: int) -> list[str]:
    return [
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "--sasl-enabled-mechanisms",
        "SCRAM-SHA-512",
    ]


def _add_users(admin: AdminClient) -> None:
    for user, password in USERS.items():
        upsert = UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
        )
        for fut in admin.alter_user_scram_credentials([upsert]).values():
            fut.result(timeout=30)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("acls")
    sasl_port = free_port()
    broker = BrokerProcess(tmp / "data")
    broker.args = [*_listeners(broker.port, sasl_port), *SECURED, "--num-partitions", "1"]
    broker.start()
    try:
        _add_users(AdminClient({"bootstrap.servers": broker.bootstrap}))
        yield Env(broker, sasl_port)
    finally:
        broker.stop()


def _name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def _create_topics(admin: AdminClient, *names: str) -> None:
    for fut in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        fut.result(timeout=30)


def _acl(
    rtype: ResourceType,
    name: str,
    op: AclOperation,
    principal: str = "User:alice",
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


def _grant(admin: AdminClient, *bindings: AclBinding) -> None:
    for fut in admin.create_acls(list(bindings)).values():
        fut.result(timeout=30)


def _everything_of(principal: str) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        principal,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


def _produce_error(conf: dict[str, Any], topic: str) -> KafkaError | None:
    """The delivery error of one record (None: delivered)."""
    errors: list[KafkaError | None] = []
    p = Producer({**conf, "message.timeout.ms": 20000})
    p.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    p.flush(30)
    assert errors, "the record was neither delivered nor failed"
    return errors[0]


def test_acls_are_created_described_and_deleted(env: Env) -> None:
    admin = env.admin
    topic, prefix = _name("described-"), _name("pre-")
    bindings = [
        _acl(ResourceType.TOPIC, topic, AclOperation.READ, "User:carol"),
        _acl(ResourceType.TOPIC, prefix, AclOperation.WRITE, "User:carol", ResourcePatternType.PREFIXED),
        _acl(ResourceType.GROUP, "g", AclOperation.READ, "User:carol", permission=AclPermissionType.DENY),
    ]
    _grant(admin, *bindings)
    found = admin.describe_acls(_everything_of("User:carol")).result(timeout=30)
    assert sorted(map(str, found)) == sorted(map(str, bindings))
    # MATCH: every pattern that applies to a resource of that name (here the prefixed one).
    match = AclBindingFilter(
        ResourceType.TOPIC,
        f"{prefix}x",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert [str(b) for b in admin.describe_acls(match).result(timeout=30)] == [str(bindings[1])]
    # Invalid: the cluster resource has one name; a principal is Type:name.
    bad = [
        _acl(ResourceType.BROKER, "other", AclOperation.ALTER, "User:carol"),
        _acl(ResourceType.TOPIC, topic, AclOperation.READ, "carol"),
    ]
    for fut in admin.create_acls(bad).values():
        with pytest.raises(KafkaException) as e:
            fut.result(timeout=30)
        assert e.value.args[0].code() == KafkaError.INVALID_REQUEST
    deny_filter = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:carol",
        None,
        AclOperation.ANY,
        AclPermissionType.DENY,
    )
    deleted = next(iter(admin.delete_acls([deny_filter]).values())).result(timeout=30)
    assert [str(b) for b in deleted] == [str(bindings[2])]
    assert len(admin.describe_acls(_everything_of("User:carol")).result(timeout=30)) == 2
    # Kept with the metadata: a restart keeps them.
    env.broker.restart()
    after = AdminClient({"bootstrap.servers": env.broker.bootstrap})
    assert sorted(map(str, after.describe_acls(_everything_of("User:carol")).result(timeout=30))) == sorted(
        map(str, bindings[:2])
    )


def test_a_user_without_acls_is_refused_with_kafkas_errors(env: Env) -> None:
    topic, group = _name("private-"), _name("group-")
    _create_topics(env.admin, topic)
    conf = env.user("alice")
    err = _produce_error(conf, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The topic does not exist for alice's metadata.
    assert topic not in AdminClient(conf).list_topics(timeout=30).topics
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        codes: set[int] = set()
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                codes.add(msg.error().code())
            if KafkaError.GROUP_AUTHORIZATION_FAILED in codes:
                break
        assert KafkaError.GROUP_AUTHORIZATION_FAILED in codes, codes
    finally:
        consumer.close()


def test_prefixed_allows_and_a_deny_that_wins(env: Env) -> None:
    prefix = _name("orders-")
    open_topic, secret, group = f"{prefix}open", f"{prefix}secret", _name("readers-")
    _create_topics(env.admin, open_topic, secret)
    pre = ResourcePatternType.PREFIXED
    _grant(
        env.admin,
        _acl(ResourceType.TOPIC, prefix, AclOperation.WRITE, pattern=pre),
        _acl(ResourceType.TOPIC, prefix, AclOperation.READ, pattern=pre),
        _acl(ResourceType.TOPIC, secret, AclOperation.ALL, permission=AclPermissionType.DENY),
        _acl(ResourceType.GROUP, group, AclOperation.READ),
    )
    conf = env.user("alice")
    assert _produce_error(conf, open_topic) is None
    err = _produce_error(conf, secret)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # WRITE/READ imply DESCRIBE: alice sees the open topic, not the denied one.
    listed = AdminClient(conf).list_topics(timeout=30).topics
    assert open_topic in listed and secret not in listed
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([open_topic])
        got = None
        for _ in range(120):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got = msg.value()
                break
        assert got == b"v"
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_a_super_user_may_do_everything(env: Env) -> None:
    topic = _name("anything-")
    conf = env.user("admin")
    assert _produce_error(conf, topic) is None  # auto-created: CREATE on the cluster
    assert topic in AdminClient(conf).list_topics(timeout=30).topics


def _raw_login(env: Env, user: str) -> RawClient:
    """A raw connection authenticated as `user` (SCRAM-SHA-512 over SaslHandshake v1/SaslAuthenticate)."""
    raw = RawClient(f"127.0.0.1:{env.sasl_port}")
    assert raw.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
    client = ScramClient(["SCRAM-SHA-512"], user, USERS[user])
    first = raw.request(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()), 2)
    client.set_server_first(first.auth_bytes.decode())
    final = raw.request(SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()), 2)
    assert final.error_code == 0, final
    client.set_server_final(final.auth_bytes.decode())
    return raw


def test_idempotent_producer_needs_write_somewhere(env: Env) -> None:
    """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster or WRITE on some
    topic (Kafka 3's rule), else CLUSTER_AUTHORIZATION_FAILED. dave has no ACL until the grant."""
    init = InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=-1, producer_id=-1, producer_epoch=-1
    )
    with _raw_login(env, "dave") as raw:
        refused = raw.request(init, 4)
    assert refused.error_code == 31 and refused.producer_id == -1, refused  # CLUSTER_AUTHORIZATION_FAILED
    topic = _name("idem-")
    _create_topics(env.admin, topic)
    _grant(env.admin, _acl(ResourceType.TOPIC, topic, AclOperation.WRITE, principal="User:dave"))
    with _raw_login(env, "dave") as raw:
        allowed = raw.request(init, 4)
    assert allowed.error_code == 0 and allowed.producer_id >= 0, allowed
    assert _produce_error({**env.user("dave"), "enable.idempotence": True}, topic) is None


def test_acl_apis_without_an_authorizer_answer_security_disabled(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for fut in admin.create_acls([_acl(ResourceType.TOPIC, "t", AclOperation.READ)]).values():
            with pytest.raises(KafkaException) as e:
                fut.result(timeout=30)
            assert e.value.args[0].code() == KafkaError.SECURITY_DISABLED
        # (confluent-kafka's describe_acls drops DescribeAcls' top-level error: ask on the wire.)
        req = DescribeAclsRequest(
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
        with RawClient(broker.bootstrap) as c:
            assert c.request(req, 3).error_code == KafkaError.SECURITY_DISABLED
    finally:
        broker.stop()


@pytest.mark.slow
def test_acls_in_etcd_reach_every_broker(tmp_path: Path) -> None:
    # PLAINTEXT between brokers and for the admin (ANONYMOUS is a super user), SASL for users.
    sasl_ports: dict[int, int] = {}

    def listeners(node_id: int, port: int) -> list[str]:
        sasl_ports[node_id] = free_port()
        return _listeners(port, sasl_ports[node_id])

    cluster = Cluster(tmp_path, extra_args=SECURED, port_args=listeners).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        _add_users(admin)
        topic = _name("shared-")
        for fut in admin.create_topics([NewTopic(topic, 3, 3)]).values():
            fut.result(timeout=30)
        # Through broker 0 only; alice then produces to all three partitions' leaders.
        only_0 = AdminClient({"bootstrap.servers": cluster.broker(0).bootstrap})
        _grant(only_0, _acl(ResourceType.TOPIC, topic, AclOperation.WRITE))
        users = ",".join(f"127.0.0.1:{p}" for p in sasl_ports.values())
        conf = {**Env(cluster.broker(0), 0).user("alice"), "bootstrap.servers": users}

        def delivered_everywhere() -> bool:
            p = Producer({**conf, "message.timeout.ms": 10000})
            errors: list[Any] = []
            for part in range(3):
                p.produce(topic, b"v", partition=part, on_delivery=lambda e, _m: errors.append(e))
            p.flush(15)
            return len(errors) == 3 and all(e is None for e in errors)

        eventually(delivered_everywhere, 60, "alice's records to reach every partition leader")
        # Deleted through broker 1: refused everywhere again.
        only_1 = AdminClient({"bootstrap.servers": cluster.broker(1).bootstrap})
        next(iter(only_1.delete_acls([_everything_of("User:alice")]).values())).result(timeout=30)

        def refused() -> bool:
            err = _produce_error({**conf, "message.timeout.ms": 10000}, topic)
            return err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

        eventually(refused, 60, "alice to be refused after the ACL is deleted")
    finally:
        cluster.stop()


def test_a_transactional_producer_needs_write_on_its_transactional_id(env: Env) -> None:
    topic, tid = _name("txn-"), _name("tid-")
    _create_topics(env.admin, topic)
    _grant(env.admin, _acl(ResourceType.TOPIC, topic, AclOperation.WRITE))
    conf = {**env.user("alice"), "transactional.id": tid}
    refused = Producer(conf)
    with pytest.raises(KafkaException) as e:
        refused.init_transactions(30)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    _grant(env.admin, _acl(ResourceType.TRANSACTIONAL_ID, tid, AclOperation.WRITE))
    p = Producer(conf)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"in a transaction")
    p.commit_transaction(30)
