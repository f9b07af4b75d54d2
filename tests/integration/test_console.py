"""The `brook` CLI as a user runs it (a subprocess, JSON output parsed) against a real broker and a real
3-broker cluster: topics, produce/consume, groups with exact lag, offset resets, cluster info, and
one-line errors with exit codes on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster

pytestmark = pytest.mark.slow


def brook(
    bootstrap: str, *args: str, input: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BROOK_BOOTSTRAP": bootstrap}
    r = subprocess.run(
        [sys.executable, "-m", "brook.cli", *args],
        input=input,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if check:
        assert r.returncode == 0, f"brook {' '.join(args)} exited {r.returncode}: {r.stderr}"
    return r


def as_json(bootstrap: str, *args: str) -> Any:
    return json.loads(brook(bootstrap, *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("console") / "data", args=["--auto-create-topics", "false"]
    ).start()
    try:
        yield b.bootstrap
    finally:
        b.stop()


def test_topics_create_list_describe_alter_grow_delete(single: str) -> None:
    brook(single, "topic", "create", "orders", "-p", "3", "-r", "1", "-c", "retention.ms=3600000")
    listed = {t["topic"]: t for t in as_json(single, "topic", "list")}
    assert listed["orders"] == {"topic": "orders", "partitions": 3, "replicas": 1}
    d = as_json(single, "topic", "describe", "orders")
    assert [p["partition"] for p in d["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == 0 and p["isr"] == [0] and p["end_offset"] == 0 for p in d["partitions"])
    configs = {c["name"]: c for c in d["configs"]}
    assert (
        configs["retention.ms"]["value"] == "3600000" and "DYNAMIC_TOPIC" in configs["retention.ms"]["source"]
    )
    brook(
        single, "topic", "alter-config", "orders", "--set", "retention.ms=60000", "--delete", "cleanup.policy"
    )
    configs = {c["name"]: c for c in as_json(single, "topic", "describe", "orders")["configs"]}
    assert configs["retention.ms"]["value"] == "60000"
    brook(single, "topic", "add-partitions", "orders", "--total", "4")
    assert len(as_json(single, "topic", "describe", "orders")["partitions"]) == 4
    brook(single, "topic", "delete", "orders")
    assert "orders" not in {t["topic"] for t in as_json(single, "topic", "list")}


def test_produce_then_consume_lines_with_keys_and_headers(single: str, tmp_path: Path) -> None:
    brook(single, "topic", "create", "lines", "-p", "1")
    brook(single, "produce", "lines", "-k", ":", "-H", "origin=test", input="a:1\nb:2\nc:3\n")
    f = tmp_path / "more.txt"
    f.write_text("".join(f"k{i}:v{i}\n" for i in range(100)))
    r = brook(single, "produce", "lines", "-k", ":", "--file", str(f))
    assert "produced 100 records" in r.stderr
    out = brook(
        single,
        "consume",
        "lines",
        "--from-beginning",
        "-n",
        "103",
        "--format",
        "{offset} {key}={value} {headers}",
    ).stdout.splitlines()
    assert out[:3] == ["0 a=1 origin=test", "1 b=2 origin=test", "2 c=3 origin=test"]
    assert out[-1] == "102 k99=v99 "
    assert brook(single, "consume", "lines", "--offset", "101", "-n", "2").stdout.split() == ["v98", "v99"]


def test_group_lag_is_exact_and_offsets_reset_as_planned(single: str) -> None:
    brook(single, "topic", "create", "work", "-p", "2")
    brook(single, "produce", "work", "-p", "0", input="".join(f"{i}\n" for i in range(10)))
    brook(single, "produce", "work", "-p", "1", input="".join(f"{i}\n" for i in range(6)))
    c = Consumer({"bootstrap.servers": single, "group.id": "workers", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("work", 0, 4), TopicPartition("work", 1, 6)], asynchronous=False)
    c.close()
    assert "workers" in {g["group"] for g in as_json(single, "group", "list")}
    d = as_json(single, "group", "describe", "workers")
    lags = {(p["topic"], p["partition"]): (p["committed"], p["end"], p["lag"]) for p in d["partitions"]}
    assert lags == {("work", 0): (4, 10, 6), ("work", 1): (6, 6, 0)} and d["total_lag"] == 6

    plan = as_json(single, "group", "reset-offsets", "workers", "--topic", "work", "--to-earliest")
    assert not plan["executed"] and [p["new"] for p in plan["offsets"]] == [0, 0]
    assert as_json(single, "group", "describe", "workers")["total_lag"] == 6  # a plan changes nothing
    brook(single, "group", "reset-offsets", "workers", "--topic", "work", "--shift-by", "-2", "--execute")
    d = as_json(single, "group", "describe", "workers")
    assert {p["partition"]: p["committed"] for p in d["partitions"]} == {0: 2, 1: 4} and d["total_lag"] == 10
    brook(single, "group", "delete", "workers")
    assert "workers" not in {g["group"] for g in as_json(single, "group", "list")}


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["topic", "describe", "nope"], 1, "topic nope"),
        (["topic", "create", "bad name!"], 1, "create bad name!"),
        (["topic", "create", "x", "-c", "retention.ms"], 2, "--config expects key=value"),
        (["topic", "alter-config", "x"], 2, "nothing to change"),
        (["group", "reset-offsets", "g", "--topic", "t"], 2, "exactly one of"),
        (["topic", "list", "-X", "novalue"], 2, "-X expects key=value"),
        (["topic", "create", "x", "-p", "0"], 2, "Invalid value for '--partitions'"),
    ],
)
def test_bad_input_is_one_line_with_an_exit_code(
    single: str, args: list[str], code: int, fragment: str
) -> None:
    r = brook(single, *args, check=False)
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and fragment in r.stderr


def test_an_unreachable_cluster_is_one_line(tmp_path: Path) -> None:
    from tests.support.ports import free_port

    start = time.monotonic()
    r = brook(f"127.0.0.1:{free_port()}", "topic", "list", check=False)
    assert r.returncode == 1 and "cannot reach the cluster" in r.stderr and "Traceback" not in r.stderr
    assert "Connection refused" in r.stderr, r.stderr  # librdkafka's own reason
    # Every broker refused for DOWN_S (3 s): not the 15 s an unanswered request waits.
    assert time.monotonic() - start < 12


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("console-cluster"))
    c.start()
    try:
        yield c
    finally:
        c.stop()


def test_cluster_info_and_a_replicated_topic(cluster: Cluster) -> None:
    b = cluster.bootstrap
    info = as_json(b, "cluster", "info")
    assert [x["id"] for x in info["brokers"]] == [0, 1, 2] and info["controller"] in (0, 1, 2)
    brook(b, "topic", "create", "replicated", "-p", "6", "-r", "3")
    d = as_json(b, "topic", "describe", "replicated")
    assert len(d["partitions"]) == 6 and all(sorted(p["replicas"]) == [0, 1, 2] for p in d["partitions"])
    assert as_json(b, "cluster", "info")["under_replicated_partitions"] == []


def test_elect_leaders_moves_leadership_back_to_the_preferred_replicas(cluster: Cluster) -> None:
    """After a broker restarts, its partitions are led elsewhere; ElectLeaders (PREFERRED) hands them
    back once it is in sync again: through the CLI, which uses confluent-kafka's elect_leaders."""
    from tests.support.cluster import eventually

    b = cluster.bootstrap
    brook(b, "topic", "create", "balance", "-p", "6", "-r", "3")

    def parts() -> list[dict[str, Any]]:
        return list(as_json(b, "topic", "describe", "balance")["partitions"])

    led_by_0 = [p["partition"] for p in parts() if p["replicas"][0] == 0]
    assert led_by_0, "broker 0 is the preferred leader of some partitions"
    cluster.broker(0).stop()  # a clean stop hands its leaderships over
    cluster.broker(0).start()
    eventually(lambda: all(0 in p["isr"] for p in parts()), 60, "broker 0 back in every ISR")
    assert any(p["leader"] != p["replicas"][0] for p in parts()), "nothing to elect: test is void"
    out = brook(b, "cluster", "elect-leaders", "--topic", "balance", "--preferred").stdout
    assert "elected" in out, out
    assert all(p["leader"] == p["replicas"][0] for p in parts())
    again = brook(b, "cluster", "elect-leaders", "--topic", "balance").stdout
    assert "elected" not in again and "not needed" in again.lower(), again
