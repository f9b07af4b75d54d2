"""Spark's built-in Kafka connector against a secured Brook: SASL_SSL with SCRAM-SHA-512 (a PEM trust
store file), and `kafka.group.id` against ACLs on the group.

One broker with two listeners: PLAINTEXT, whose ANONYMOUS principal is a super user (set-up only), and
SASL_SSL for Spark. Spark's offset look-ups go through an AdminClient by default and its executors
assign partitions, so neither joins the group; with `spark.sql.streaming.kafka.useDeprecatedOffsetFetching`
the driver subscribes a consumer in the group, which is where Kafka checks the group ACL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.conftest import GROUP_ARGS
from tests.spark.helpers import create_topic, produce, require_kafka_connector, require_spark
from tests.support.broker import BrokerProcess
from tests.support.ports import free_port

require_spark()
require_kafka_connector()
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # the first test may start Spark

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PASSWORD = "alice-secret"
TOPIC = "spark-sec"


@dataclass
class Secured:
    broker: BrokerProcess
    sasl_port: int
    ca_file: Path

    def options(self, password: str = PASSWORD) -> dict[str, str]:
        """What a Spark user passes: Kafka's client settings with the connector's `kafka.` prefix."""
        return {
            "kafka.bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="alice" password="{password}";',
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(self.ca_file),
            "subscribe": TOPIC,
        }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    tmp = tmp_path_factory.mktemp("spark-sec")
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(tmp / "server.pem")
    )
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    sasl_port = free_port()
    broker = BrokerProcess(tmp / "data")
    broker.args = [
        *("--listeners", f"PLAINTEXT://127.0.0.1:{broker.port},SASL_SSL://127.0.0.1:{sasl_port}"),
        *("--ssl-keystore-location", str(tmp / "server.pem")),
        *("--sasl-enabled-mechanisms", "SCRAM-SHA-512"),
        *("--authorizer-class-name", AUTHORIZER, "--super-users", "User:ANONYMOUS"),
        *GROUP_ARGS,
        *("--num-partitions", "2"),
    ]
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode()
        )
        for fut in admin.alter_user_scram_credentials([upsert]).values():
            fut.result(30)
        create_topic(broker.bootstrap, TOPIC, 2)
        produce(broker.bootstrap, TOPIC, [(None, b"%d" % i, None, i % 2) for i in range(100)])

        def allow(rtype: ResourceType, name: str, op: AclOperation) -> AclBinding:
            lit, yes = ResourcePatternType.LITERAL, AclPermissionType.ALLOW
            return AclBinding(rtype, name, lit, "User:alice", "*", op, yes)

        grants = [allow(ResourceType.TOPIC, TOPIC, op) for op in (AclOperation.READ, AclOperation.DESCRIBE)]
        grants.append(allow(ResourceType.GROUP, "spark-allowed", AclOperation.READ))
        for fut in admin.create_acls(grants).values():
            fut.result(30)
        yield Secured(broker, sasl_port, tmp / "ca.pem")
    finally:
        broker.stop()


def read(spark: Any, **opts: str) -> list[Any]:
    r = spark.read.format("kafka")
    for k, v in opts.items():
        r = r.option(k, v)
    return list(r.load().select("value").collect())


def test_sasl_ssl_scram_batch_read(spark: Any, secured: Secured) -> None:
    rows = read(spark, **secured.options())
    assert sorted(int(r.value) for r in rows) == list(range(100))


def test_wrong_password_is_an_authentication_error(spark: Any, secured: Secured) -> None:
    with pytest.raises(Exception) as err:
        read(spark, **secured.options("wrong"))
    text = str(err.value)
    causes = "\n".join(line for line in text.splitlines() if "Exception" in line and "\tat " not in line)
    # The broker's refusal, not the client's own check of the server's signature.
    assert "SaslAuthenticationException" in text, causes[:3000]
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in text, causes[:3000]


def test_group_id_with_acls_on_the_group(spark: Any, secured: Secured) -> None:
    spark.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    try:
        rows = read(spark, **secured.options(), **{"kafka.group.id": "spark-allowed"})
        assert sorted(int(r.value) for r in rows) == list(range(100))
        with pytest.raises(Exception) as err:
            read(spark, **secured.options(), **{"kafka.group.id": "spark-denied"})
        assert "GroupAuthorizationException" in str(err.value), str(err.value)[-3000:]
        assert "spark-denied" in str(err.value)
    finally:
        spark.conf.unset("spark.sql.streaming.kafka.useDeprecatedOffsetFetching")
