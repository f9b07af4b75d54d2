"""Kafka's own command-line tools (4.4, run by class name as bin/*.sh do) against a 3-broker Brook
cluster, each checked by its output and by what it changed."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster, eventually
from tests.support.jvm import JavaClients, kafka_tool

pytestmark = [pytest.mark.slow, pytest.mark.needs_cluster]
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # An authorizer that allows what no ACL covers (kafka-acls needs one; the other tools do not care).
    c = Cluster(
        tmp_path_factory.mktemp("tools"),
        extra_args=["--authorizer-class-name", AUTHORIZER, "--allow-everyone-if-no-acl-found", "true"],
    ).start()
    try:
        yield c
    finally:
        c.stop()


def tool(cluster: Cluster, name: str, *args: str, ok: bool = True) -> str:
    r = kafka_tool(name, "--bootstrap-server", cluster.bootstrap.split(",")[0], *args)
    if ok:
        assert r.returncode == 0, f"{name} {args}: {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout + r.stderr


def test_kafka_topics(cluster: Cluster) -> None:
    created = tool(
        cluster,
        "kafka-topics",
        "--create",
        "--topic",
        "t-tools",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
        "--config",
        "retention.ms=100000",
    )
    assert "Created topic t-tools." in created
    desc = tool(cluster, "kafka-topics", "--describe", "--topic", "t-tools")
    assert re.search(r"PartitionCount: 3\s+ReplicationFactor: 3\s+Configs: retention.ms=100000", desc), desc
    assert len(re.findall(r"Partition: \d\s+Leader: \d\s+Replicas: \d,\d,\d\s+Isr: \d,\d,\d", desc)) == 3, (
        desc
    )
    again = tool(cluster, "kafka-topics", "--create", "--topic", "t-tools", "--partitions", "1", ok=False)
    assert "TopicExistsException" in again and "already exists" in again
    tool(cluster, "kafka-topics", "--alter", "--topic", "t-tools", "--partitions", "4")
    assert "PartitionCount: 4" in tool(cluster, "kafka-topics", "--describe", "--topic", "t-tools")
    assert "t-tools" in tool(cluster, "kafka-topics", "--list").split()
    tool(cluster, "kafka-topics", "--delete", "--topic", "t-tools")
    eventually(lambda: "t-tools" not in tool(cluster, "kafka-topics", "--list").split(), 20, "t-tools gone")


def group_offsets(cluster: Cluster, group: str) -> dict[int, tuple[int, int, int]]:
    """partition → (current offset, log end offset, lag) from kafka-consumer-groups --describe."""
    out = tool(cluster, "kafka-consumer-groups", "--describe", "--group", group)
    rows = re.findall(rf"^{group}\s+\S+\s+(\d+)\s+(\d+|-)\s+(\d+)\s+(\d+|-)", out, re.M)
    return {
        int(p): (int(cur) if cur != "-" else -1, int(end), int(lag) if lag != "-" else -1)
        for p, cur, end, lag in rows
    }


def reset(cluster: Cluster, group: str, *how: str) -> dict[int, int]:
    out = tool(
        cluster,
        "kafka-consumer-groups",
        "--group",
        group,
        "--topic",
        "perf",
        "--reset-offsets",
        *how,
        "--execute",
    )
    return {int(p): int(o) for p, o in re.findall(rf"^{group}\s+perf\s+(\d+)\s+(\d+)", out, re.M)}


def test_perf_tools_and_consumer_groups(cluster: Cluster, tmp_path: Path) -> None:
    tool(
        cluster,
        "kafka-topics",
        "--create",
        "--topic",
        "perf",
        "--partitions",
        "2",
        "--replication-factor",
        "3",
    )
    produced = kafka_tool(
        "kafka-producer-perf-test",
        "--topic",
        "perf",
        "--num-records",
        "6000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={cluster.bootstrap}",
        "acks=all",
    )
    assert produced.returncode == 0 and re.search(r"^6000 records sent", produced.stdout, re.M), produced
    consumed = tool(
        cluster,
        "kafka-consumer-perf-test",
        "--topic",
        "perf",
        "--messages",
        "6000",
        "--group",
        "perf-g",
        "--timeout",
        "30000",
    )
    # The data row: start, end, MB, MB/s, records (the 5th column), ...
    row = [line for line in consumed.splitlines() if re.match(r"^\d{4}-", line)]
    assert row and int(row[0].split(",")[4].strip()) >= 6000, consumed

    assert "perf-g" in tool(cluster, "kafka-consumer-groups", "--list").split()
    offsets = group_offsets(cluster, "perf-g")
    ends = {p: end for p, (_, end, _) in offsets.items()}
    assert sum(ends.values()) == 6000 and all(lag == 0 for _, _, lag in offsets.values()), offsets
    assert "perf-g" in tool(cluster, "kafka-consumer-groups", "--describe", "--group", "perf-g", "--state")

    assert reset(cluster, "perf-g", "--to-earliest") == {0: 0, 1: 0}
    assert {p: lag for p, (_, _, lag) in group_offsets(cluster, "perf-g").items()} == ends
    assert reset(cluster, "perf-g", "--to-offset", "10") == {0: 10, 1: 10}
    assert reset(cluster, "perf-g", "--shift-by", "-4") == {0: 6, 1: 6}
    assert reset(cluster, "perf-g", "--to-current") == {0: 6, 1: 6}
    assert reset(cluster, "perf-g", "--to-latest") == ends
    assert reset(cluster, "perf-g", "--to-datetime", "2000-01-01T00:00:00.000") == {0: 0, 1: 0}
    assert reset(cluster, "perf-g", "--by-duration", "PT0S") == ends  # nothing is newer than now
    (tmp_path / "plan.csv").write_text("perf,0,7\nperf,1,8\n")
    out = tool(
        cluster,
        "kafka-consumer-groups",
        "--group",
        "perf-g",
        "--reset-offsets",
        "--from-file",
        str(tmp_path / "plan.csv"),
        "--execute",
    )
    assert re.search(r"perf-g\s+perf\s+0\s+7", out) and re.search(r"perf-g\s+perf\s+1\s+8", out), out
    assert {p: cur for p, (cur, _, _) in group_offsets(cluster, "perf-g").items()} == {0: 7, 1: 8}

    out = tool(cluster, "kafka-consumer-groups", "--delete", "--group", "perf-g")
    assert "Deletion of requested consumer groups ('perf-g') was successful." in out
    assert "perf-g" not in tool(cluster, "kafka-consumer-groups", "--list").split()


def configs(cluster: Cluster, kind: str, name: str | None, *args: str, ok: bool = True) -> str:
    """kafka-configs --entity-type KIND (--entity-name NAME | --entity-default) ARGS..."""
    who = ["--entity-default"] if name is None else ["--entity-name", name]
    return tool(cluster, "kafka-configs", "--entity-type", kind, *who, *args, ok=ok)


def test_kafka_configs(cluster: Cluster) -> None:
    tool(
        cluster,
        "kafka-topics",
        "--create",
        "--topic",
        "cfg",
        "--partitions",
        "1",
        "--replication-factor",
        "1",
    )
    configs(
        cluster,
        "topics",
        "cfg",
        "--alter",
        "--add-config",
        "retention.ms=5000,cleanup.policy=[delete,compact]",
    )
    out = configs(cluster, "topics", "cfg", "--describe")
    assert "retention.ms=5000" in out and "cleanup.policy=delete,compact" in out, out
    configs(cluster, "topics", "cfg", "--alter", "--delete-config", "retention.ms")
    assert "retention.ms" not in configs(cluster, "topics", "cfg", "--describe")
    bad = configs(cluster, "topics", "cfg", "--alter", "--add-config", "retention.ms=never", ok=False)
    assert "InvalidConfigurationException" in bad or "Invalid value" in bad, bad

    configs(cluster, "brokers", "1", "--alter", "--add-config", "log.retention.bytes=1073741824")
    out = configs(cluster, "brokers", "1", "--describe")
    assert "log.retention.bytes=1073741824 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:" in out, out
    static = configs(cluster, "brokers", "1", "--alter", "--add-config", "log.dirs=/elsewhere", ok=False)
    assert "InvalidRequestException" in static, static
    configs(cluster, "brokers", None, "--alter", "--add-config", "log.retention.ms=3600000")
    assert "log.retention.ms=3600000" in configs(cluster, "brokers", None, "--describe")

    scram = "SCRAM-SHA-256=[iterations=8192,password=alice-secret]"
    configs(cluster, "users", "alice", "--alter", "--add-config", scram)
    configs(cluster, "users", "alice", "--alter", "--add-config", "producer_byte_rate=1024")
    out = configs(cluster, "users", "alice", "--describe")
    assert "SCRAM-SHA-256=iterations=8192" in out and "producer_byte_rate=1024" in out, out
    configs(cluster, "clients", "cl1", "--alter", "--add-config", "consumer_byte_rate=2048")
    out = tool(cluster, "kafka-configs", "--entity-type", "clients", "--describe")
    assert "Quota configs for client-id 'cl1' are consumer_byte_rate=2048.0" in out, out


def test_kafka_acls(cluster: Cluster) -> None:
    alice = ["--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe"]
    alice += ["--topic", "acl-t", "--group", "acl-g"]
    out = tool(cluster, "kafka-acls", "--add", *alice)
    assert (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=acl-t, patternType=LITERAL)`"
        in out
    )
    tool(
        cluster,
        "kafka-acls",
        "--add",
        "--producer",
        "--allow-principal",
        "User:bob",
        "--topic",
        "pre-",
        "--resource-pattern-type",
        "prefixed",
    )
    listed = tool(cluster, "kafka-acls", "--list")
    for want in (
        "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
        "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)",
        "ResourcePattern(resourceType=GROUP, name=acl-g, patternType=LITERAL)",
        "ResourcePattern(resourceType=TOPIC, name=pre-, patternType=PREFIXED)",
        "(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)",
        "(principal=User:bob, host=*, operation=CREATE, permissionType=ALLOW)",
    ):
        assert want in listed, (want, listed)
    one = tool(cluster, "kafka-acls", "--list", "--topic", "acl-t")
    assert "User:alice" in one and "User:bob" not in one
    tool(cluster, "kafka-acls", "--remove", "--force", *alice)
    tool(
        cluster, "kafka-acls", "--remove", "--force", "--topic", "pre-", "--resource-pattern-type", "prefixed"
    )
    assert "principal=" not in tool(cluster, "kafka-acls", "--list")


def test_kafka_transactions(cluster: Cluster, tmp_path: Path) -> None:
    tool(
        cluster,
        "kafka-topics",
        "--create",
        "--topic",
        "txt",
        "--partitions",
        "1",
        "--replication-factor",
        "3",
    )
    with JavaClients(tmp_path / "java.log") as java:
        java.call(
            "producer",
            name="tx",
            config={"bootstrap.servers": cluster.bootstrap, "transactional.id": "tool-tx"},
        )
        java.call("init_transactions", name="tx")
        java.call("begin_transaction", name="tx")
        java.call("send", name="tx", topic="txt", records=[{"value": "open"}])
        listed = tool(cluster, "kafka-transactions", "list")
        assert re.search(r"^tool-tx\s+\d+\s+\d+\s+Ongoing", listed, re.M), listed
        desc = tool(cluster, "kafka-transactions", "describe", "--transactional-id", "tool-tx")
        assert "Ongoing" in desc and "txt-0" in desc, desc
        producers = tool(
            cluster, "kafka-transactions", "describe-producers", "--topic", "txt", "--partition", "0"
        )
        # ProducerId Epoch LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset
        [row] = [line.split() for line in producers.splitlines()[1:] if line.strip()]
        assert row[5] == "0", producers  # its transaction starts at offset 0
        for broker in (0, 1, 2):  # every replica answers, the followers too
            out = tool(cluster, "kafka-transactions", "find-hanging", "--broker-id", str(broker))
            assert "Topic\tPartition" in out or "Topic" in out, out
        # kafka-transactions abort: markers written to the partition for the open transaction.
        tool(
            cluster,
            "kafka-transactions",
            "abort",
            "--topic",
            "txt",
            "--partition",
            "0",
            "--start-offset",
            "0",
        )
        java.call(
            "consumer",
            name="c",
            config={"bootstrap.servers": cluster.bootstrap, "isolation.level": "read_committed"},
        )
        assert java.call("end_offsets", name="c", partitions=[["txt", 0]]) == {"txt-0": 2}
        assert "Ongoing" not in tool(
            cluster, "kafka-transactions", "describe-producers", "--topic", "txt", "--partition", "0"
        )


def test_reassign_and_leader_election(cluster: Cluster, tmp_path: Path) -> None:
    tool(cluster, "kafka-topics", "--create", "--topic", "mv", "--replica-assignment", "0:1,1:2")
    (tmp_path / "topics.json").write_text(json.dumps({"topics": [{"topic": "mv"}], "version": 1}))
    gen = tool(
        cluster,
        "kafka-reassign-partitions",
        "--generate",
        "--topics-to-move-json-file",
        str(tmp_path / "topics.json"),
        "--broker-list",
        "0,1,2",
    )
    current, proposed = re.findall(r"^\{.*\}$", gen, re.M)
    assert [(p["partition"], p["replicas"]) for p in json.loads(current)["partitions"]] == [
        (0, [0, 1]),
        (1, [1, 2]),
    ]
    assert all(len(p["replicas"]) == 2 for p in json.loads(proposed)["partitions"])
    plan = {"version": 1, "partitions": [{"topic": "mv", "partition": 0, "replicas": [2, 1]}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    out = tool(
        cluster,
        "kafka-reassign-partitions",
        "--execute",
        "--reassignment-json-file",
        str(tmp_path / "plan.json"),
    )
    assert "Successfully started partition reassignment for mv-0" in out, out

    def verified() -> bool:
        out = tool(
            cluster,
            "kafka-reassign-partitions",
            "--verify",
            "--reassignment-json-file",
            str(tmp_path / "plan.json"),
        )
        return "Reassignment of partition mv-0 is completed." in out

    eventually(verified, 60, "the reassignment of mv-0")
    assert re.search(
        r"Partition: 0\s+Leader: \d\s+Replicas: 2,1\s",
        tool(cluster, "kafka-topics", "--describe", "--topic", "mv"),
    )
    out = tool(
        cluster, "kafka-leader-election", "--election-type", "preferred", "--topic", "mv", "--partition", "0"
    )
    assert "Successfully completed leader election (PREFERRED) for partitions mv-0" in out or (
        "Valid replica already elected for partitions mv-0" in out
    ), out
    eventually(
        lambda: re.search(
            r"Partition: 0\s+Leader: 2\s", tool(cluster, "kafka-topics", "--describe", "--topic", "mv")
        ),
        30,
        "broker 2 leading mv-0",
    )


def test_offsets_delete_records_log_dirs(cluster: Cluster, tmp_path: Path) -> None:
    tool(
        cluster, "kafka-topics", "--create", "--topic", "dr", "--partitions", "1", "--replication-factor", "3"
    )
    out = tool(cluster, "kafka-verifiable-producer", "--topic", "dr", "--max-messages", "50", "--acks", "-1")
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert sum(e["name"] == "producer_send_success" for e in events) == 50, out[-2000:]
    with JavaClients(tmp_path / "java.log") as java:  # one record an hour ahead: the newest timestamp
        java.call("producer", name="p", config={"bootstrap.servers": cluster.bootstrap})
        java.call(
            "send",
            name="p",
            topic="dr",
            records=[{"value": "later", "timestamp": int(time.time() * 1000) + 3600_000}],
        )
    assert "dr:0:51" in tool(cluster, "kafka-get-offsets", "--topic", "dr", "--time", "-1")
    assert "dr:0:50" in tool(cluster, "kafka-get-offsets", "--topic", "dr", "--time", "-3")  # max timestamp
    (tmp_path / "del.json").write_text(
        json.dumps({"partitions": [{"topic": "dr", "partition": 0, "offset": 20}]})
    )
    out = tool(cluster, "kafka-delete-records", "--offset-json-file", str(tmp_path / "del.json"))
    assert "partition: dr-0\tlow_watermark: 20" in out, out
    assert "dr:0:20" in tool(cluster, "kafka-get-offsets", "--topic", "dr", "--time", "-2")
    out = tool(cluster, "kafka-log-dirs", "--describe", "--topic-list", "dr")
    report = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    sizes = {
        (b["broker"], p["partition"]): p["size"]
        for b in report["brokers"]
        for d in b["logDirs"]
        for p in d["partitions"]
    }
    assert set(sizes) == {(0, "dr-0"), (1, "dr-0"), (2, "dr-0")} and all(s > 0 for s in sizes.values()), (
        report
    )

    out = tool(
        cluster,
        "kafka-verifiable-consumer",
        "--topic",
        "dr",
        "--group-id",
        "vg",
        "--max-messages",
        "30",
        "--reset-policy",
        "earliest",
    )
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    consumed = [p for e in events if e["name"] == "records_consumed" for p in e["partitions"]]
    assert sum(p["count"] for p in consumed) == 30 and consumed[0]["minOffset"] == 20, out[-2000:]
    committed = [e for e in events if e["name"] == "offsets_committed" and e["success"]]
    assert committed and committed[-1]["offsets"][0]["offset"] >= 50, out[-2000:]
