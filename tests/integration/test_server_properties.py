"""`brook broker --config server.properties` with real broker processes: Kafka's own sample starts a
broker with only the expected lines about what Brook ignores, every property Brook supports comes back
from DescribeConfigs as STATIC_BROKER_CONFIG with the value given, and bad files stop the start with one
line (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trustme
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

from brook.config import BROKER_TOPIC_SYNONYMS
from brook.settings.options import BY_KAFKA, RACK_AWARE_SELECTOR
from tests.support.broker import BrokerProcess
from tests.support.ports import free_port
from tests.support.raw import RawClient

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).parents[1] / "data" / "kafka-server.properties"
BROKER, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 4, 2, 3, 4, 5


def describe(bootstrap: str, keys: list[str] | None = None, node: int = 0) -> dict[str, Any]:
    res = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=BROKER, resource_name=str(node), configuration_keys=keys
    )
    with RawClient(bootstrap) as c:
        (result,) = c.request(DescribeConfigsRequest(resources=[res], include_synonyms=False), 4).results
    assert result.error_code == 0, result.error_message
    return {e.name: e for e in result.configs}


def warnings(log: str) -> list[str]:
    return [ln.split("brook.cli: ", 1)[1] for ln in log.splitlines() if " WARNING brook.cli: " in ln]


def test_kafkas_sample_server_properties_starts_a_broker(tmp_path: Path) -> None:
    port = free_port()
    listener = f"PLAINTEXT://127.0.0.1:{port}"
    b = BrokerProcess(
        tmp_path / "data",
        port,
        args=[
            "--config",
            str(SAMPLE),
            # As one runs Kafka's sample on a shared machine: own port and directory.
            "--override",
            f"listeners={listener},CONTROLLER://:9093",
            "--override",
            f"advertised.listeners={listener}",
        ],
    ).start()
    try:
        configs = describe(b.bootstrap, node=1)  # the sample's node.id
        log = b.log_text()
    finally:
        b.stop()
    assert warnings(log) == [
        "ignored (Brook has no KRaft quorum): the controller listener CONTROLLER",
        "ignored (Brook has no KRaft quorum: its brokers elect a controller through etcd): process.roles, "
        "controller.quorum.bootstrap.servers, controller.listener.names",
        "ignored (Brook serves from one asyncio event loop: it has no thread pools): num.network.threads, "
        "num.io.threads, num.recovery.threads.per.data.dir",
        "ignored (the kernel sizes Brook's socket buffers): socket.send.buffer.bytes, "
        "socket.receive.buffer.bytes",
        "ignored (Brook's share groups take their settings from group configs (share.*), with Kafka's "
        "defaults): share.coordinator.state.topic.replication.factor, share.coordinator.state.topic.min.isr",
        "ignored (Brook's internal topics take the broker's min.insync.replicas): "
        "transaction.state.log.min.isr",
    ]
    assert "Traceback" not in log
    for name, value in [
        ("node.id", "1"),
        ("listeners", listener),
        ("inter.broker.listener.name", "PLAINTEXT"),
        ("num.partitions", "1"),  # Kafka's default, but the file sets it
        ("log.retention.hours", "168"),
        ("log.segment.bytes", "1073741824"),
        ("offsets.topic.replication.factor", "1"),
        ("log.dirs", str(tmp_path / "data")),  # --data-dir is a flag: it wins over the file
    ]:
        assert (configs[name].value, configs[name].config_source) == (value, STATIC), name
    assert configs["log.retention.ms"].config_source == DEFAULT  # only log.retention.hours is set


def every_supported_property(data: Path, port: int, tls: Path) -> dict[str, str]:
    listeners = f"PLAINTEXT://127.0.0.1:{port},REPLICATION://127.0.0.1:{free_port()}"
    return {
        "node.id": "0",
        "broker.id": "0",
        "broker.rack": "rack-a",
        "replica.selector.class": RACK_AWARE_SELECTOR,
        "default.replication.factor": "1",
        "replica.lag.time.max.ms": "20000",
        "leader.replication.throttled.rate": "1000000",
        "auto.leader.rebalance.enable": "false",
        "leader.imbalance.check.interval.seconds": "120",
        "leader.imbalance.per.broker.percentage": "20",
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
        "inter.broker.listener.name": "REPLICATION",
        "ssl.keystore.location": str(tls / "server.pem"),
        "ssl.truststore.location": str(tls / "ca.pem"),
        "ssl.client.auth": "requested",
        "ssl.enabled.protocols": "TLSv1.3",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "connections.max.reauth.ms": "60000",
        "connection.failed.authentication.delay.ms": "50",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.oauthbearer.jwks.endpoint.url": "https://idp.invalid/jwks",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms": "600000",
        "sasl.oauthbearer.expected.audience": "brook",
        "sasl.oauthbearer.expected.issuer": "https://idp.invalid",
        "sasl.oauthbearer.sub.claim.name": "preferred_username",
        "sasl.oauthbearer.clock.skew.seconds": "10",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "true",
        "log.dirs": str(data),
        "auto.create.topics.enable": "false",
        "num.partitions": "2",
        "log.retention.check.interval.ms": "60000",
        "log.flush.scheduler.interval.ms": "2000",
        "log.cleaner.backoff.ms": "5000",
        "offsets.topic.num.partitions": "5",
        "offsets.topic.replication.factor": "1",
        "offsets.retention.minutes": "60",
        "offsets.retention.check.interval.ms": "30000",
        "group.min.session.timeout.ms": "5000",
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.heartbeat.interval.ms": "4000",
        "group.consumer.session.timeout.ms": "40000",
        "group.consumer.max.size": "100",
        "group.max.size": "50",
        "group.consumer.assignors": "range,uniform",
        "group.consumer.migration.policy": "upgrade",
        "producer.id.expiration.ms": "3600000",
        "producer.id.expiration.check.interval.ms": "60000",
        "transaction.state.log.num.partitions": "5",
        "transaction.state.log.replication.factor": "1",
        "transaction.max.timeout.ms": "600000",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "5000",
        "transactional.id.expiration.ms": "86400000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "60000",
        "socket.request.max.bytes": "50000000",
        "max.connections": "500",
        "max.connections.per.ip": "100",
        "max.connections.per.ip.overrides": "127.0.0.1:200",
        "max.connection.creation.rate": "50",
        "max.broker.partitions": "5000",
        "quota.window.num": "5",
        "quota.window.size.seconds": "2",
        # topic defaults by their broker names
        "log.cleanup.policy": "delete",
        "log.retention.ms": "3600000",
        "log.retention.minutes": "90",
        "log.retention.hours": "2",
        "log.retention.bytes": "1000000000",
        "log.segment.bytes": "100000000",
        "log.roll.ms": "3600000",
        "log.roll.hours": "2",
        "log.index.size.max.bytes": "1048576",
        "log.index.interval.bytes": "8192",
        "log.flush.interval.messages": "100000",
        "log.flush.interval.ms": "5000",
        "message.max.bytes": "2000000",
        "log.message.timestamp.type": "LogAppendTime",
        "min.insync.replicas": "1",
        "unclean.leader.election.enable": "true",
        "log.cleaner.delete.retention.ms": "3600000",
        "log.cleaner.min.compaction.lag.ms": "1000",
        "log.cleaner.min.cleanable.ratio": "0.3",
        "log.cleaner.max.compaction.lag.ms": "86400000",
        "log.roll.jitter.ms": "100",
        "log.segment.delete.delay.ms": "1000",
        "log.message.timestamp.before.max.ms": "86400000",
        "log.message.timestamp.after.max.ms": "3600000",
        "compression.type": "zstd",
    }


def test_every_supported_property_round_trips_as_static(tmp_path: Path) -> None:
    ca = trustme.CA()
    tls = tmp_path / "tls"
    tls.mkdir()
    ca.cert_pem.write_to_path(str(tls / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tls / "server.pem"))
    port = free_port()
    props = every_supported_property(tmp_path / "data", port, tls)
    time_synonyms = {"log.retention.minutes", "log.retention.hours", "log.roll.hours", "node.id", "broker.id"}
    assert set(props) == set(BY_KAFKA) | set(BROKER_TOPIC_SYNONYMS) | time_synonyms  # a new one needs a value
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    b = BrokerProcess(tmp_path / "data", port, args=["--config", str(config)]).start()
    try:
        configs = describe(b.bootstrap)
        assert warnings(b.log_text()) == []
    finally:
        b.stop()
    wrong = {
        k: (configs[k].value, configs[k].config_source) if k in configs else "missing"
        for k, v in props.items()
        if k not in configs or (configs[k].value, configs[k].config_source) != (v, STATIC)
    }
    assert wrong == {}


def start(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "brook.cli", "broker", "--metrics-port", "-1", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("num.partitions=0\n", "num.partitions=0: must be an integer from 1 to 2147483647"),
        (
            "log.retention.bytes=lots\n",
            "log.retention.bytes=lots: log.retention.bytes must be an integer from -1",
        ),
        ("ssl.client.auth=always\n", "ssl.client.auth=always: must be one of none, requested, required"),
        ("log.dirs=/a,/b\n", "log.dirs=/a,/b: Brook keeps one log directory per broker"),
    ],
)
def test_an_invalid_value_is_one_line_and_exit_2(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "server.properties"
    config.write_text(text)
    r = start("--config", str(config), "--data-dir", str(tmp_path / "d"))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"brook: {config}: {message}"), r.stderr
    assert "Traceback" not in r.stderr


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    r = start("--config", str(tmp_path / "nope.properties"), "--data-dir", str(tmp_path / "d"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"brook: --config {tmp_path / 'nope.properties'}: No such file or directory"


def test_unknown_properties_are_one_warning_and_the_broker_starts(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("num.partitions=4\nfrobnicate.level=11\nlog.flush.wibble=1\n")
    b = BrokerProcess(tmp_path / "data", args=["--config", str(config), "--override", "num.partitions=5"])
    b.start()
    try:
        configs = describe(b.bootstrap, ["num.partitions"])
        assert warnings(b.log_text()) == [
            "unknown properties, ignored (Brook has no such setting): frobnicate.level, log.flush.wibble"
        ]
    finally:
        b.stop()
    assert (configs["num.partitions"].value, configs["num.partitions"].config_source) == ("5", STATIC)


def test_precedence_flag_over_override_over_file(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(
        "num.partitions=2\nnum.partitions=3\ndefault.replication.factor=1\nlog.retention.hours=5\n"
    )
    b = BrokerProcess(
        tmp_path / "data",
        args=["--config", str(config), "--override", "num.partitions=6", "--num-partitions", "7"],
    ).start()
    try:
        configs = describe(b.bootstrap)
    finally:
        b.stop()
    assert configs["num.partitions"].value == "7"
    assert (configs["log.retention.hours"].value, configs["log.retention.hours"].config_source) == (
        "5",
        STATIC,
    )
    assert (configs["message.max.bytes"].config_source) == DEFAULT


def alter(c: RawClient, name: str, key: str, value: str) -> None:
    """IncrementalAlterConfigs SET on a broker resource ("": every broker's dynamic default)."""
    r = IncrementalAlterConfigsRequest.AlterConfigsResource
    config = r.AlterableConfig(version=1, name=key, config_operation=0, value=value)
    res = r(version=1, resource_type=BROKER, resource_name=name, configs=[config])
    req = IncrementalAlterConfigsRequest(version=1, resources=[res], validate_only=False)
    assert c.request(req, 1).responses[0].error_code == 0


def test_dynamic_values_stand_over_the_static_chain(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("log.retention.ms=3600000\n")
    b = BrokerProcess(tmp_path / "data", args=["--config", str(config)]).start()
    try:
        with RawClient(b.bootstrap) as c:
            alter(c, "", "log.retention.ms", "120000")
            alter(c, "0", "log.retention.ms", "60000")
            res = DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=BROKER, resource_name="0", configuration_keys=["log.retention.ms"]
            )
            (result,) = c.request(DescribeConfigsRequest(resources=[res], include_synonyms=True), 4).results
    finally:
        b.stop()
    (entry,) = result.configs
    assert (entry.value, entry.config_source) == ("60000", DYNAMIC_BROKER)
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [  # Kafka's chain, most specific first
        ("log.retention.ms", "60000", DYNAMIC_BROKER),
        ("log.retention.ms", "120000", DYNAMIC_DEFAULT),
        ("log.retention.ms", "3600000", STATIC),
        ("log.retention.hours", "168", DEFAULT),
    ]
