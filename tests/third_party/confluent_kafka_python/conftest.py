"""The fixtures of confluent-kafka-python's tests/integration (conftest.py, cluster_fixture.py) that its
schema registry tests use, backed by one real Brook broker serving its schema registry.

Upstream's tests import their support code as `tests.integration.conftest` and their data as
`tests.integration.schema_registry.data.proto`; here `tests.integration` is Brook's, so both names are
made to point at the vendored tree before the test modules are imported (the files stay unmodified).
Tests that cannot apply to Brook are skipped by id below (SKIPS), each with its reason."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import inspect
import sys
import time
import types
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, DeserializingConsumer, Producer, SerializingProducer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import AsyncSchemaRegistryClient, SchemaRegistryClient

from tests.support.broker import BrokerProcess
from tests.support.registry import serving_broker

from .common._async.consumer import TestAsyncDeserializingConsumer
from .common._async.producer import TestAsyncSerializingProducer

C = TypeVar("C", bound=Consumer)
HERE = Path(__file__).parent
DATA = HERE / "schema_registry" / "data"

sys.modules["tests.integration.schema_registry"] = importlib.import_module(f"{__package__}.schema_registry")


def _no_other_cluster(*args: Any, **kwargs: Any) -> Iterator[Any]:
    """Upstream's kafka_cluster_fixture starts a trivup cluster of another Confluent Platform version;
    its only user here (kafka_cluster_cp_7_0_1) is skipped."""
    raise NotImplementedError("only the Brook broker of the kafka_cluster fixture is available")


_shim = sys.modules.get("tests.integration.conftest") or types.ModuleType("tests.integration.conftest")
if not hasattr(_shim, "kafka_cluster_fixture"):
    _shim.kafka_cluster_fixture = _no_other_cluster  # type: ignore[attr-defined]
sys.modules["tests.integration.conftest"] = _shim

_TESTS = "tests/third_party/confluent_kafka_python/schema_registry/"

# Test ids (relative to schema_registry/) skipped, and why.
SKIPS: dict[str, str] = {
    f"{variant}/test_api_client.py::test_api_get_register_schema_invalid[kafka_cluster_cp_7_0_1-500-500]": (
        "a second cluster with Confluent Platform 7.0.1's registry, which answered 500 for an invalid "
        "schema; Brook answers 422/42201 as current versions do ([kafka_cluster-422-42201] runs)"
    )
    for variant in ("_sync", "_async")
}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker, so -m 'not slow' leaves these out
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    collected = set()
    for item in items:
        if item.nodeid.startswith(_TESTS):
            item.add_marker(pytest.mark.slow)
            test_id = item.nodeid[len(_TESTS) :]
            collected.add(test_id)
            if test_id in SKIPS:
                item.add_marker(pytest.mark.skip(reason=SKIPS[test_id]))
    # A skip naming no test (renamed upstream, a typo) is an error once its whole file was collected.
    root = config.invocation_params.dir
    for test_id in SKIPS.keys() - collected:
        path = (config.rootpath / _TESTS / test_id.split("::")[0]).resolve()
        whole = any("::" not in a and path.is_relative_to((root / a).resolve()) for a in config.args)
        if whole:
            raise pytest.UsageError(f"{__file__}: SKIPS names a test that does not exist: {test_id}")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """The _async tests are coroutines (upstream runs them with pytest-asyncio's auto mode): each runs
    in an event loop of its own."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**args))
    return True


class BrookCluster:
    """What upstream's KafkaClusterFixture offers its schema registry tests, on one Brook broker."""

    def __init__(self, broker: BrokerProcess, registry_url: str) -> None:
        self.broker = broker
        self.registry_url = registry_url
        self._admin: AdminClient | None = None
        self._consumers: list[Consumer] = []  # closed at the end: upstream's tests leave some open

    def client_conf(self, conf: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"bootstrap.servers": self.broker.bootstrap, **(conf or {})}

    def schema_registry(self, conf: dict[str, Any] | None = None) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.registry_url, **(conf or {})})

    def async_schema_registry(self, conf: dict[str, Any] | None = None) -> AsyncSchemaRegistryClient:
        return AsyncSchemaRegistryClient({"url": self.registry_url, **(conf or {})})

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.client_conf())
        return self._admin

    def create_topic(self, prefix: str, conf: dict[str, Any] | None = None, **kwargs: Any) -> str:
        name = f"{prefix}-{uuid.uuid1()}"
        topic_conf = {"num_partitions": 1, "replication_factor": 1, **(conf or {})}
        self.admin().create_topics([NewTopic(name, **topic_conf)], **kwargs)[name].result(30)
        return name

    def create_topic_and_wait_propogation(  # upstream's spelling
        self, prefix: str, conf: dict[str, Any] | None = None, **kwargs: Any
    ) -> str:
        """Upstream sleeps 1 s for the topic to reach every broker; this waits until its partitions
        have a leader in the metadata."""
        name = self.create_topic(prefix, conf, **kwargs)
        deadline = time.monotonic() + 30
        while True:
            topic = self.admin().list_topics(name, timeout=10).topics.get(name)
            leaders = [p.leader for p in topic.partitions.values()] if topic and not topic.error else []
            if leaders and min(leaders) >= 0:
                return name
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} has no leader after 30 s")
            time.sleep(0.05)

    def delete_topic(self, topic: str) -> None:
        self.admin().delete_topics([topic])[topic].result(30)

    def cimpl_producer(self, conf: dict[str, Any] | None = None) -> Producer:
        return Producer(self.client_conf(conf))

    def producer(
        self, conf: dict[str, Any] | None = None, key_serializer: Any = None, value_serializer: Any = None
    ) -> SerializingProducer:
        client_conf = self.client_conf(conf)
        if key_serializer is not None:
            client_conf["key.serializer"] = key_serializer
        if value_serializer is not None:
            client_conf["value.serializer"] = value_serializer
        return SerializingProducer(client_conf)

    def async_producer(
        self, conf: dict[str, Any] | None = None, key_serializer: Any = None, value_serializer: Any = None
    ) -> TestAsyncSerializingProducer:
        client_conf = self.client_conf(conf)
        if key_serializer is not None:
            client_conf["key.serializer"] = key_serializer
        if value_serializer is not None:
            client_conf["value.serializer"] = value_serializer
        return TestAsyncSerializingProducer(client_conf)  # type: ignore[no-untyped-call]

    def _consumer_conf(self, conf: dict[str, Any] | None) -> dict[str, Any]:
        return self.client_conf(
            {"group.id": str(uuid.uuid1()), "auto.offset.reset": "earliest", **(conf or {})}
        )

    def _kept(self, consumer: C) -> C:
        self._consumers.append(consumer)
        return consumer

    def close(self) -> None:
        for consumer in self._consumers:
            with contextlib.suppress(RuntimeError):  # closed already
                consumer.close()
        self._consumers.clear()
        gc.collect()  # and the producers the tests dropped, before the broker goes

    def cimpl_consumer(self, conf: dict[str, Any] | None = None) -> Consumer:
        return self._kept(Consumer(self._consumer_conf(conf)))

    def consumer(
        self,
        conf: dict[str, Any] | None = None,
        key_deserializer: Any = None,
        value_deserializer: Any = None,
    ) -> DeserializingConsumer:
        consumer_conf = self._consumer_conf(conf)
        if key_deserializer is not None:
            consumer_conf["key.deserializer"] = key_deserializer
        if value_deserializer is not None:
            consumer_conf["value.deserializer"] = value_deserializer
        return self._kept(DeserializingConsumer(consumer_conf))

    def async_consumer(
        self,
        conf: dict[str, Any] | None = None,
        key_deserializer: Any = None,
        value_deserializer: Any = None,
    ) -> TestAsyncDeserializingConsumer:
        consumer_conf = self._consumer_conf(conf)
        if key_deserializer is not None:
            consumer_conf["key.deserializer"] = key_deserializer
        if value_deserializer is not None:
            consumer_conf["value.deserializer"] = value_deserializer
        return self._kept(TestAsyncDeserializingConsumer(consumer_conf))  # type: ignore[no-untyped-call]


@pytest.fixture(scope="package")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrookCluster]:
    """One broker serving the registry for every vendored test (upstream: one per session)."""
    with serving_broker(tmp_path_factory.mktemp("ckp-registry") / "data") as (broker, url):
        cluster = BrookCluster(broker, url)
        try:
            yield cluster
        finally:
            cluster.close()


@pytest.fixture
def load_file() -> Callable[[str], str]:
    def get_handle(name: str) -> str:
        return (DATA / name).read_text()

    return get_handle
