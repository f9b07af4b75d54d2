from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One real broker process per test module, on a free loopback port."""
    root: Path = tmp_path_factory.mktemp("broker")
    b = BrokerProcess(root / "data", args=["--num-partitions", "3"]).start()
    try:
        yield b
    finally:
        b.stop()


# Groups form at once in tests (Kafka waits 3 s for more members of a new group).
GROUP_ARGS = ["--group-initial-rebalance-delay-ms", "0", "--offsets-topic-partitions", "10"]


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker tuned for consumer-group tests."""
    b = BrokerProcess(tmp_path_factory.mktemp("groups") / "data", args=GROUP_ARGS).start()
    try:
        yield b
    finally:
        b.stop()


# Directories whose session (or package) fixtures start something big (Kafka, the control plane,
# Spark, the vendored tests' broker) run whole on one pytest-xdist worker; every other module runs
# whole on one worker, with its module fixtures.
_SESSION_DIRS = ("differential", "e2e", "spark", "third_party")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(item.path).relative_to(config.rootpath).parts
        group = parts[1] if len(parts) > 2 and parts[1] in _SESSION_DIRS else "/".join(parts)
        item.add_marker(pytest.mark.xdist_group(group))
