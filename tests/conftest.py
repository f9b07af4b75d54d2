from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


# pytest-xdist (scripts/test): each test module runs whole on one worker, with its module fixtures;
# each directory whose session (or package) fixtures start something big (Kafka, the control plane,
# Spark, the vendored tests' broker) runs whole on one worker. (xdist's own --dist loadgroup renames
# node ids, which pytest 9 no longer allows, so the grouping is a scheduler of its own.)
_WHOLE_DIRS = ("differential", "e2e", "spark", "third_party")


def xdist_group_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 and parts[1] in _WHOLE_DIRS else path


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_Grouping(), "brook-test-grouping")


class _Grouping:
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        from xdist.scheduler import LoadScopeScheduling

        class ByGroup(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return xdist_group_of(nodeid)

        return ByGroup(config, log)
