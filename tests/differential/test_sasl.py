"""SASL before and during authentication, on a SASL_PLAINTEXT listener of each broker (PLAIN and
SCRAM-SHA-512 enabled, a user alice): requests out of order, unknown mechanisms, wrong passwords."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brook.protocol.versions import ApiKey
from tests.support.broker import BrokerProcess
from tests.support.differential import CLOSED, Wire, differences
from tests.support.kafka_peer import KafkaPeer
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

PASSWORD = "alice-secret"
MECHANISMS = "PLAIN,SCRAM-SHA-512"


def kafka_sasl(root: Path) -> tuple[KafkaPeer, int]:
    """One Kafka node with a SASL_PLAINTEXT listener beside its PLAINTEXT one: PLAIN's users in JAAS,
    SCRAM's in the cluster's metadata (set below with AlterUserScramCredentials)."""
    peer = KafkaPeer(root, nodes=1, heap="256m")
    node, sasl = peer.nodes[0], free_port()
    plain = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORD}";'
    peer.config = {
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{sasl},"
        f"CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    }  # fmt: skip
    return peer, sasl


def add_scram_user(bootstrap: str) -> None:
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha512", PASSWORD.encode(), salt, 4096)
    upsert = {"name": "alice", "mechanism": 2, "iterations": 4096, "salt": salt, "salted_password": salted}
    with Wire(bootstrap) as w:
        answer = w.send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [upsert]})
    assert isinstance(answer, dict) and answer["results"][0]["error_code"] == "NONE(0)", answer


@pytest.fixture(scope="module")
def sasl_peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The SASL_PLAINTEXT addresses of (Kafka, Brook)."""
    root = tmp_path_factory.mktemp("sasl")
    kafka, kafka_sasl_port = kafka_sasl(root / "kafka")
    brook_sasl = free_port()
    brook = BrokerProcess(root / "brook" / "data")
    brook.args = [
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{brook.port},SASL_PLAINTEXT://127.0.0.1:{brook_sasl}",
        "--sasl-enabled-mechanisms",
        MECHANISMS,
    ]
    started = threading.Thread(target=brook.start)
    started.start()
    try:
        kafka.start()
    finally:
        started.join()
    try:
        for bootstrap in (kafka.bootstrap, brook.bootstrap):
            add_scram_user(bootstrap)
        yield f"127.0.0.1:{kafka_sasl_port}", f"127.0.0.1:{brook_sasl}"
    finally:
        brook.stop()
        kafka.stop()


def handshake(mechanism: str) -> tuple[int, int, dict[str, Any]]:
    return ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism}


def authenticate(token: bytes) -> tuple[int, int, dict[str, Any]]:
    return ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token}


METADATA = (ApiKey.METADATA, 12, {"topics": None})
API_VERSIONS = (
    ApiKey.API_VERSIONS,
    3,
    {"client_software_name": "differential", "client_software_version": "1"},
)
GOOD = f"\0alice\0{PASSWORD}".encode()

SEQUENCES: dict[str, list[tuple[int, int, dict[str, Any]]]] = {
    "metadata-first": [METADATA],
    "api-versions-first": [API_VERSIONS, handshake("PLAIN"), authenticate(GOOD), METADATA],
    "unknown-mechanism": [handshake("GSSAPI"), API_VERSIONS],
    "handshake-then-metadata": [handshake("PLAIN"), METADATA],
    "wrong-password": [handshake("PLAIN"), authenticate(b"\0alice\0wrong"), METADATA],
    "unknown-user": [handshake("PLAIN"), authenticate(b"\0bob\0" + PASSWORD.encode()), METADATA],
    "malformed-plain": [handshake("PLAIN"), authenticate(b"alice"), METADATA],
    "login": [handshake("PLAIN"), authenticate(GOOD), METADATA],
    "authenticate-first": [authenticate(GOOD), METADATA],
    "handshake-twice": [handshake("PLAIN"), handshake("PLAIN"), METADATA],
    "scram-unknown-user": [
        handshake("SCRAM-SHA-512"),
        authenticate(b"n,,n=bob,r=abcdefghijklmnop"),
        METADATA,
    ],
    "scram-garbage": [handshake("SCRAM-SHA-512"), authenticate(b"hello"), METADATA],
}


@pytest.mark.parametrize("name", list(SEQUENCES))
def test_sasl_sequences(sasl_peers: tuple[str, str], name: str) -> None:
    """The same sequence on a fresh connection to each; every answer compared, CLOSED included."""
    answers: list[list[Any]] = []
    for bootstrap in sasl_peers:
        with Wire(bootstrap, authenticated=False) as w:
            seq = []
            for api_key, version, fields in SEQUENCES[name]:
                seq.append(w.send(api_key, version, fields))
                if seq[-1] == CLOSED:
                    break
            answers.append(seq)
    diff = differences(*answers, ignore=["api_keys"])
    assert not diff, "\n".join(diff)
