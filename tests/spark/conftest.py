"""Fixtures for the PySpark data source tests: one local[2] SparkSession for the whole run, one Brook per
module. Test modules that need Spark call `require_spark()` (skips without pyspark or a JDK)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker import BrokerProcess

# Executors must use this interpreter (it has pyarrow and confluent-kafka), not `python3` from PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.spark.helpers import spark_session

    session = spark_session(tmp_path_factory.mktemp("spark-warehouse"))
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def brook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root: Path = tmp_path_factory.mktemp("brook")
    b = BrokerProcess(
        root / "data", args=["--num-partitions", "3", "--retention-check-interval-ms", "200"]
    ).start()
    try:
        yield b
    finally:
        b.stop()
