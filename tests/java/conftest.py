"""Fixtures for tests that run Apache Kafka's Java clients and tools against real Brook brokers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import GROUP_ARGS
from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster
from tests.support.jvm import JavaClients


@pytest.fixture(scope="module")
def jbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker, topics not created on first use (Java tests create what they use)."""
    root: Path = tmp_path_factory.mktemp("jbroker")
    b = BrokerProcess(
        root / "data", args=[*GROUP_ARGS, "--num-partitions", "3", "--auto-create-topics", "false"]
    ).start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def jcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("jcluster")).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def java(tmp_path: Path) -> Iterator[JavaClients]:
    """A JVM with the Java clients for one test (its log in the test's tmp_path)."""
    with JavaClients(tmp_path / "java.log") as j:
        yield j


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """3 brokers aborting timed-out transactions every 0.5 s, so that a killed client's open
    transaction is aborted within its own timeout (Streams and Connect tests kill them)."""
    c = Cluster(
        tmp_path_factory.mktemp("txn-cluster"),
        extra_args=["--transaction-abort-timed-out-transaction-cleanup-interval-ms", "500"],
    ).start()
    try:
        yield c
    finally:
        c.stop()
