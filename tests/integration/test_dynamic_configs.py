"""Config resources beyond topics and SCRAM credentials, through real admin clients: dynamic broker configs
(a topic default changed cluster-wide takes effect on appends), group configs, and user SCRAM credentials;
all kept in the cluster's metadata (across a restart, and seen by every broker of a cluster)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.integration.test_clients import create_topic
from tests.integration.test_cluster import cluster, create  # noqa: F401 (fixture)
from tests.integration.test_durability import compressible, stored_codecs
from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster, eventually
from tests.support.raw import RawClient

pytestmark = pytest.mark.slow

BROKER, GROUP, TOPIC = ConfigResource.Type.BROKER, ConfigResource.Type.GROUP, ConfigResource.Type.TOPIC


def cluster_default(bootstrap: str, **ops: tuple[str, str | None]) -> dict[str, str]:
    """IncrementalAlterConfigs, then DescribeConfigs, of the cluster-wide broker resource (name ""), which
    confluent-kafka's Python client does not address."""
    from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

    codes = {"SET": 0, "DELETE": 1}
    alter = IncrementalAlterConfigsRequest.AlterConfigsResource
    configs = [
        alter.AlterableConfig(version=1, name=k.replace("_", "."), config_operation=codes[op], value=v)
        for k, (op, v) in ops.items()
    ]
    with RawClient(bootstrap) as c:
        if configs:
            res = alter(version=1, resource_type=4, resource_name="", configs=configs)
            req = IncrementalAlterConfigsRequest(version=1, resources=[res], validate_only=False)
            assert c.request(req, 1).responses[0].error_code == 0
        dres = DescribeConfigsRequest.DescribeConfigsResource(
            version=4, resource_type=4, resource_name="", configuration_keys=None
        )
        req = DescribeConfigsRequest(
            version=4, resources=[dres], include_synonyms=False, include_documentation=False
        )
        result = c.request(req, 4).results[0]
    assert result.error_code == 0
    return {e.name: e.value for e in result.configs}


def incremental(a: AdminClient, kind: ConfigResource.Type, name: str, **ops: tuple[str, str | None]) -> None:
    entries = [
        ConfigEntry(k.replace("_", "."), v, incremental_operation=getattr(AlterConfigOpType, op))
        for k, (op, v) in ops.items()
    ]
    res = ConfigResource(kind, name, incremental_configs=entries)
    a.incremental_alter_configs([res])[res].result(10)


def describe(a: AdminClient, kind: ConfigResource.Type, name: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(kind, name)
    return dict(a.describe_configs([res])[res].result(10))


def error_name(e: pytest.ExceptionInfo[KafkaException]) -> str:
    return str(e.value.args[0].name())


def produce(bootstrap: str, topic: str, codec: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20})
    for k, v, h in compressible(50):
        p.produce(topic, v, k, headers=h)
    assert p.flush(30) == 0


def test_dynamic_broker_configs(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        create_topic(b.bootstrap, "dyn", 1)
        create_topic(b.bootstrap, "owncodec", 1, {"compression.type": "producer"})
        # A cluster-wide default: topics without their own compression.type now recompress.
        cluster_default(b.bootstrap, compression_type=("SET", "zstd"), background_threads=("SET", "9"))
        produce(b.bootstrap, "dyn", "lz4")
        produce(b.bootstrap, "owncodec", "lz4")
        assert stored_codecs(b.data_dir, "dyn") == {4}
        assert stored_codecs(b.data_dir, "owncodec") == {3}
        topic = describe(a, TOPIC, "dyn")["compression.type"]
        assert (topic.value, topic.source) == ("zstd", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        # This broker's own value wins over the cluster-wide one.
        incremental(a, BROKER, "0", log_cleanup_policy=("APPEND", "compact"))
        configs = describe(a, BROKER, "0")
        assert configs["log.cleanup.policy"].value == "delete,compact"
        assert configs["log.cleanup.policy"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert configs["background.threads"].value == "9"  # kept, though Brook has no such pool
        assert describe(a, TOPIC, "dyn")["cleanup.policy"].value == "delete,compact"
        assert cluster_default(b.bootstrap) == {"compression.type": "zstd", "background.threads": "9"}
        for bad in ({"num_partitions": ("SET", "3")}, {"log_retention_ms": ("SET", "soon")}):
            with pytest.raises(KafkaException) as e:
                incremental(a, BROKER, "0", **bad)
            assert error_name(e) == "INVALID_REQUEST"
        b.kill()
        b.start()  # kept in the metadata, applied at start-up
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        assert describe(a, TOPIC, "dyn")["cleanup.policy"].value == "delete,compact"
        cluster_default(b.bootstrap, compression_type=("DELETE", None))
        incremental(a, BROKER, "0", log_cleanup_policy=("SUBTRACT", "compact"))
        assert describe(a, TOPIC, "dyn")["compression.type"].value == "producer"
        assert describe(a, TOPIC, "dyn")["cleanup.policy"].value == "delete"
    finally:
        b.stop()


def test_group_configs(broker: BrokerProcess) -> None:
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = describe(a, GROUP, "no-such-group")  # a group need not exist
    assert configs["consumer.session.timeout.ms"].value == "45000"
    assert configs["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    incremental(a, GROUP, "cfg-group", consumer_session_timeout_ms=("SET", "50000"))
    configs = describe(a, GROUP, "cfg-group")
    assert configs["consumer.session.timeout.ms"].value == "50000"
    assert configs["consumer.session.timeout.ms"].source == ConfigSource.GROUP_CONFIG.value
    for bad in ({"consumer_session_timeout_ms": ("SET", "1000")}, {"no_such_config": ("SET", "1")}):
        with pytest.raises(KafkaException) as e:
            incremental(a, GROUP, "cfg-group", **bad)
        assert error_name(e) == "INVALID_CONFIG"
    incremental(a, GROUP, "cfg-group", consumer_session_timeout_ms=("DELETE", None))
    assert describe(a, GROUP, "cfg-group")["consumer.session.timeout.ms"].value == "45000"


def test_user_scram_credentials(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        with pytest.raises(KafkaException) as e:
            a.describe_user_scram_credentials(["alice"])["alice"].result(10)
        assert error_name(e) == "RESOURCE_NOT_FOUND"
        sha256 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
        upsert = UserScramCredentialUpsertion("alice", sha256, b"secret", b"salt\x00salt")
        a.alter_user_scram_credentials([upsert])["alice"].result(10)
        few = UserScramCredentialUpsertion(
            "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 100), b"x"
        )
        with pytest.raises(KafkaException) as e:
            a.alter_user_scram_credentials([few])["bob"].result(10)
        assert error_name(e) == "UNACCEPTABLE_CREDENTIAL"
        b.kill()
        b.start()
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        info = a.describe_user_scram_credentials(["alice"])["alice"].result(10)
        assert [(c.mechanism, c.iterations) for c in info.scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_256, 8192)
        ]
        # Only what a SCRAM server needs is kept: the salt, StoredKey and ServerKey, not the password.
        salted = hashlib.pbkdf2_hmac("sha256", b"secret", b"salt\x00salt", 8192)
        kept = json.loads((b.data_dir / "meta.json").read_text())["scram"]["alice"]["SCRAM-SHA-256"]
        stored_key = hashlib.sha256(hmac.digest(salted, b"Client Key", "sha256")).digest()
        assert kept["stored_key"] == base64.b64encode(stored_key).decode()
        assert "secret" not in json.dumps(kept)
        delete = UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)
        a.alter_user_scram_credentials([delete])["alice"].result(10)
        with pytest.raises(KafkaException) as e:
            a.alter_user_scram_credentials([delete])["alice"].result(10)
        assert error_name(e) == "RESOURCE_NOT_FOUND"
        assert a.describe_user_scram_credentials().result(10) == {}
        # One request may set several mechanisms of a user; only a repeated user+mechanism is refused.
        both = [
            UserScramCredentialUpsertion("dave", ScramCredentialInfo(m, 4096), b"pw")
            for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
        ]
        a.alter_user_scram_credentials(both)["dave"].result(10)
        info = a.describe_user_scram_credentials(["dave"])["dave"].result(10)
        assert sorted(c.mechanism for c in info.scram_credential_infos) == [
            ScramMechanism.SCRAM_SHA_256,
            ScramMechanism.SCRAM_SHA_512,
        ]
        twice = [both[0], UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)]
        with pytest.raises(KafkaException) as e:
            a.alter_user_scram_credentials(twice)["dave"].result(10)
        assert error_name(e) == "DUPLICATE_RESOURCE"
        info = a.describe_user_scram_credentials(["dave"])["dave"].result(10)
        assert len(info.scram_credential_infos) == 2  # nothing of the refused request applied
    finally:
        b.stop()


def test_cluster_wide_configs_and_credentials_reach_every_broker(cluster: Cluster) -> None:  # noqa: F811
    create(cluster, "dync", 3, 1)  # one replica per partition, on the three brokers
    first = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
    cluster_default(cluster.brokers[0].bootstrap, compression_type=("SET", "gzip"))
    sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upsert = UserScramCredentialUpsertion("carol", sha512, b"pw", b"salt")
    first.alter_user_scram_credentials([upsert])["carol"].result(10)
    for b in cluster.brokers:
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        eventually(lambda a=a: describe(a, TOPIC, "dync")["compression.type"].value == "gzip")
        info = a.describe_user_scram_credentials(["carol"])["carol"].result(10)
        assert info.scram_credential_infos[0].iterations == 4096
    produce(cluster.bootstrap, "dync", "snappy")
    codecs = set().union(*(stored_codecs(b.data_dir, "dync") for b in cluster.brokers))
    assert codecs == {1}


def test_deleting_configs_no_broker_has_is_answered_at_once(cluster: Cluster) -> None:  # noqa: F811
    """kafka-reassign-partitions clears throttles that were never set (IncrementalAlterConfigs DELETE
    on each broker). Deleting an absent key writes nothing: a broker waited for etcd's current
    revision, which can be a write its watch never sees, for 10 s, then closed the connection; the
    tool failed after 6 tries. Now each is answered NONE at once, on every broker."""
    ops = [
        ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)
        for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
    ]
    for node in range(3):
        admin = AdminClient({"bootstrap.servers": cluster.broker(node).bootstrap})
        resource = ConfigResource("broker", str(node), incremental_configs=ops)
        for _ in range(3):
            for f in admin.incremental_alter_configs([resource]).values():
                f.result(5)  # raises on an error or a closed connection
