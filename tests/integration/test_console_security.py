"""`brook acl` and `brook user` as a user runs them (a subprocess, JSON output parsed) against a real
broker with an authorizer: the ACLs they add are the ones Kafka clients are refused by, SCRAM users
they set can log in, and bad input or a cluster without an authorizer is one line with an exit code.
Also the time-bound topic configs a Kafka user sets with `brook topic create`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from tests.integration.test_console import as_json, brook
from tests.support.broker import BrokerProcess
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A broker with PLAINTEXT (ANONYMOUS allowed what no ACL covers, as Kafka's
    allow.everyone.if.no.acl.found) and SASL_PLAINTEXT (SCRAM-SHA-512) listeners."""
    port, sasl_port = free_port(), free_port()
    b = BrokerProcess(
        tmp_path_factory.mktemp("console-security") / "data",
        port=port,
        args=[
            *("--listeners", f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"),
            *("--sasl-enabled-mechanisms", "SCRAM-SHA-512"),
            *("--authorizer-class-name", AUTHORIZER, "--allow-everyone-if-no-acl-found", "true"),
            *("--auto-create-topics", "false"),
        ],
    ).start()
    try:
        yield b.bootstrap, sasl_port
    finally:
        b.stop()


def _deliver(conf: dict[str, object], topic: str, **kw: object) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    p = Producer({**conf, "message.timeout.ms": 10_000})
    p.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err), **kw)
    p.flush(20)
    assert len(errors) == 1, "no delivery report"
    return errors[0]


def test_acls_added_listed_enforced_and_removed(secured: tuple[str, int]) -> None:
    b, _ = secured
    brook(b, "topic", "create", "payments", "-p", "1")
    assert _deliver({"bootstrap.servers": b}, "payments") is None  # no ACL on it: allowed
    added = as_json(b, "acl", "add", "--deny", "User:*", "-O", "Write", "--topic", "payments")
    assert added == [
        {
            "principal": "User:*",
            "permission": "Deny",
            "operation": "Write",
            "host": "*",
            "resource_type": "Topic",
            "pattern_type": "literal",
            "name": "payments",
        }
    ]
    err = _deliver({"bootstrap.servers": b}, "payments")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    brook(b, "acl", "add", "--allow", "User:alice", "--consumer", "--topic", "pay", "--group", "billing",
          "--pattern-type", "prefixed")  # fmt: skip
    listed = as_json(b, "acl", "list")
    assert {
        (r["principal"], r["operation"], r["resource_type"], r["pattern_type"], r["name"]) for r in listed
    } == {
        ("User:*", "Write", "Topic", "literal", "payments"),
        ("User:alice", "Read", "Topic", "prefixed", "pay"),
        ("User:alice", "Describe", "Topic", "prefixed", "pay"),
        ("User:alice", "Read", "Group", "prefixed", "billing"),
    }
    # A prefixed ACL applies to topics under it: `match` lists it for "payments" too.
    matched = {r["name"] for r in as_json(b, "acl", "list", "--topic", "payments", "--pattern-type", "match")}
    assert matched == {"payments", "pay"}
    removed = as_json(b, "acl", "remove", "--topic", "payments", "--permission", "deny")
    assert [r["operation"] for r in removed] == ["Write"]
    # alice's prefixed ACLs still cover "payments": ANONYMOUS is no longer allowed by default (Kafka's rule)
    err = _deliver({"bootstrap.servers": b}, "payments")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert len(as_json(b, "acl", "remove", "--all")) == 3 and as_json(b, "acl", "list") == []
    assert _deliver({"bootstrap.servers": b}, "payments") is None


def test_scram_users_set_list_log_in_and_delete(secured: tuple[str, int]) -> None:
    b, sasl_port = secured
    brook(b, "topic", "create", "audit", "-p", "1")
    brook(b, "user", "set", "carol", "--iterations", "4096", "--password-stdin", input="s3cret\n")
    assert {"user": "carol", "mechanism": "SCRAM-SHA-512", "iterations": 4096} in as_json(b, "user", "list")
    carol = {
        "bootstrap.servers": f"127.0.0.1:{sasl_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "carol",
        "sasl.password": "s3cret",
    }
    assert _deliver(carol, "audit") is None
    brook(b, "user", "delete", "carol")
    assert as_json(b, "user", "list") == []
    errors: list[str] = []
    p = Producer({**carol, "error_cb": lambda e: errors.append(e.str())})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert any("Authentication failed" in e or "SASL" in e for e in errors), errors


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["acl", "add", "--allow", "alice", "-O", "Read", "--topic", "t"], "must be Type:name", 2),
        (["acl", "add", "--allow", "User:a", "-O", "Reed", "--topic", "t"], "unknown operation 'Reed'", 2),
        (["acl", "add", "--allow", "User:a", "-O", "Read"], "give a resource", 2),
        (["acl", "remove"], "or --all", 2),
        (["user", "set", "x", "-m", "MD5", "--password-stdin"], "SCRAM-SHA-256 or SCRAM-SHA-512", 2),
        (["user", "delete", "nobody"], "nobody", 1),
    ],
)
def test_bad_input_is_one_line(secured: tuple[str, int], args: list[str], message: str, code: int) -> None:
    r = brook(secured[0], *args, input="pw\n", check=False)
    assert r.returncode == code and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_cluster_without_an_authorizer_says_so(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        for args in (["acl", "list"], ["acl", "add", "--allow", "User:a", "-O", "Read", "--topic", "t"]):
            r = brook(b.bootstrap, *args, check=False)
            assert r.returncode == 1 and "no authorizer" in r.stderr, r.stderr
    finally:
        b.stop()


def test_create_time_bounds_refuse_old_records(secured: tuple[str, int]) -> None:
    b, _ = secured
    brook(b, "topic", "create", "recent", "-c", "message.timestamp.before.max.ms=3600000")
    conf = {"bootstrap.servers": b}
    assert _deliver(conf, "recent") is None
    day_ago = int(time.time() * 1000) - 24 * 3600 * 1000
    err = _deliver(conf, "recent", timestamp=day_ago)
    assert err is not None and err.code() == KafkaError.INVALID_TIMESTAMP
    d = {c["name"]: c["value"] for c in as_json(b, "topic", "describe", "recent")["configs"]}
    assert d["message.timestamp.before.max.ms"] == "3600000"
