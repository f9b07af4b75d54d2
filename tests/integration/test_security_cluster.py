"""Three brokers replicating over a SASL_SSL inter-broker listener (SCRAM-SHA-512, mutual TLS) while
clients use a PLAINTEXT listener: a leader killed with -9 loses nothing acknowledged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.integration.test_cluster import Acks, consume_all, create, partition_md
from tests.support.broker import BrokerProcess
from tests.support.cluster import CLUSTER_ARGS, Cluster, eventually
from tests.support.ports import free_port

pytestmark = pytest.mark.slow


class SecureCluster(Cluster):
    """Each broker: PLAINTEXT for clients (the test's bootstrap), BROKER (SASL_SSL) between brokers."""

    def add_broker(self, node_id: int) -> BrokerProcess:
        port, inter = free_port(), free_port()
        b = BrokerProcess(
            self.root / f"broker-{node_id}",
            port=port,
            args=[
                "--node-id",
                str(node_id),
                "--etcd-endpoints",
                self.etcd.endpoint,
                *CLUSTER_ARGS,
                *self._extra,
                "--listeners",
                f"PLAINTEXT://127.0.0.1:{port},BROKER://127.0.0.1:{inter}",
                "--listener-security-protocol-map",
                "PLAINTEXT:PLAINTEXT,BROKER:SASL_SSL",
                "--inter-broker-listener-name",
                "BROKER",
            ],
        )
        self.brokers.append(b.start())
        return b


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "broker.pem"))
    (tmp_path / "password").write_text("broker-secret")
    c = SecureCluster(
        tmp_path,
        extra_args=[
            "--ssl-keystore-location",
            str(tmp_path / "broker.pem"),
            "--ssl-truststore-location",
            str(tmp_path / "ca.pem"),
            "--ssl-client-auth",
            "required",
            "--sasl-enabled-mechanisms",
            "SCRAM-SHA-512",
            "--sasl-mechanism-inter-broker-protocol",
            "SCRAM-SHA-512",
            "--inter-broker-sasl-username",
            "broker",
            "--inter-broker-sasl-password-file",
            str(tmp_path / "password"),
        ],
    ).start()
    try:
        # The brokers' own user, as Kafka's must exist before the brokers can replicate.
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        cred = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        for fut in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("broker", cred, b"broker-secret")]
        ).values():
            fut.result(timeout=30)
        yield c
    finally:
        c.stop()


def test_replication_over_sasl_ssl_survives_a_leader_kill_9(cluster: Cluster) -> None:
    create(cluster, "secure", 1, 3, {"min.insync.replicas": "3"})
    # Followers caught up over SASL_SSL: acks=all with every replica required.
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    p.produce("secure", b"first")
    assert p.flush(60) == 0
    md = partition_md(cluster, "secure")
    assert len(md.isrs) == 3
    ports = {b.port for b in cluster.brokers}
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    assert {b.port for b in admin.list_topics(timeout=10).brokers.values()} == ports  # the client listener
    leader = md.leader
    alter = AdminClient({"bootstrap.servers": cluster.bootstrap})
    res = alter.incremental_alter_configs(
        [
            ConfigResource(
                "topic",
                "secure",
                incremental_configs=[
                    ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)
                ],
            )
        ]
    )
    for fut in res.values():
        fut.result(timeout=30)
    acks = Acks()
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    killed = False
    for i in range(2000):
        p.produce("secure", f"v{i:05d}".encode(), on_delivery=acks)
        p.poll(0)
        if i % 200 == 0:
            p.flush(10)
        if not killed and len(acks.ok) >= 800:
            cluster.broker(leader).kill()
            killed = True
    assert p.flush(90) == 0
    assert killed and not acks.errors, acks.errors[:3]
    eventually(lambda: partition_md(cluster, "secure").leader not in (leader, -1), what="a new leader")
    got = consume_all(cluster, "secure", 1, 2001)
    assert [v for _, _, v in sorted(got)] == [b"first"] + [f"v{i:05d}".encode() for i in range(2000)]
