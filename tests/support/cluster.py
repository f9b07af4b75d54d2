"""A real local cluster for tests: an etcd process and N `brook broker` processes on loopback."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kafka.protocol.metadata import MetadataRequest

from brook.dev.etcd import EtcdProcess

from .broker import BrokerProcess
from .netns import Host, NetLab, NsEtcd
from .ports import free_port
from .raw import RawClient

# Short timings so failover tests take seconds: followers out of the ISR after 2 s without catching
# up. The lease TTL is the brokers' default (2 s), so tests/integration/test_failover.py measures it.
CLUSTER_ARGS = [
    "--replica-lag-time-max-ms",
    "2000",
    "--default-replication-factor",
    "3",
    "--group-initial-rebalance-delay-ms",
    "0",
    "--offsets-topic-partitions",
    "6",
    "--controlled-shutdown-timeout",
    "5",
]


class Cluster:
    def __init__(
        self,
        root: Path,
        brokers: int = 3,
        extra_args: list[str] | None = None,
        node_args: Callable[[int], list[str]] | None = None,
        port_args: Callable[[int, int], list[str]] | None = None,
        etcd: EtcdProcess | None = None,
        lab: NetLab | None = None,
        broker_env: Callable[[int], dict[str, str]] | None = None,
    ) -> None:
        """`extra_args` go to every broker, `node_args(node_id)` to that one (e.g. its --rack), and
        `port_args(node_id, port)` too, given the broker's port (e.g. its --listeners). `etcd`: one
        set up by the test (e.g. with TLS), instead of a plain one. `lab`: etcd and each broker on a
        host of its own (`hosts["etcd"]`, `hosts[node_id]`). `broker_env(node_id)`: environment
        added to that broker's (e.g. a fault shim)."""
        self.root = root
        self.lab = lab
        self.hosts: dict[str | int, Host] = {}
        if lab is not None:
            self.hosts["etcd"] = lab.host("etcd")
            etcd = etcd or NsEtcd(self.hosts["etcd"], root / "etcd")
        self.etcd = etcd or EtcdProcess(
            root / "etcd", unsafe_no_fsync=True, heartbeat_ms=100, election_ms=500
        )
        self._env = broker_env or (lambda _: {})
        self.brokers: list[BrokerProcess] = []
        self._n = brokers
        self._extra = extra_args or []
        self._node_args = node_args or (lambda _: [])
        self._port_args = port_args

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.proc is not None and b.proc.poll() is None)

    def start(self) -> Cluster:
        """Start etcd and the brokers; on failure, stop what started (fixtures call this outside try)."""
        try:
            self.etcd.start()
            for i in range(self._n):
                self.add_broker(i)
            # Each broker learns the others' registrations through its etcd watch: wait until every one
            # knows them all, or a topic created at once may see too few brokers for its replicas.
            eventually(self.all_registered, 60, f"every broker to see all {self._n} registered")
        except BaseException:
            self.stop()
            raise
        return self

    def add_broker(self, node_id: int) -> BrokerProcess:
        port = free_port()
        where: dict[str, Any] = {}
        if self.lab is not None:
            host = self.hosts.setdefault(node_id, self.lab.host(f"b{node_id}"))
            where = {"host": host.addr, "wrap": host.exec_prefix}
        b = BrokerProcess(
            self.root / f"broker-{node_id}",
            port=port,
            env=self._env(node_id),
            **where,
            args=[
                "--node-id",
                str(node_id),
                "--etcd-endpoints",
                self.etcd.endpoint,
                *CLUSTER_ARGS,
                *self._extra,
                *self._node_args(node_id),
                *(self._port_args(node_id, port) if self._port_args else []),
            ],
        )
        self.brokers.append(b.start())
        return b

    def all_registered(self) -> bool:
        want = {int(b.args[1]) for b in self.brokers}
        for b in self.brokers:
            with RawClient(b.bootstrap) as c:
                seen = {br.node_id for br in c.request(MetadataRequest(topics=[]), 12).brokers}
            if seen != want:
                return False
        return True

    def broker(self, node_id: int) -> BrokerProcess:
        return next(b for b in self.brokers if b.args[1] == str(node_id))

    def stop(self) -> None:
        for b in self.brokers:
            try:
                b.stop(timeout=20)
            except Exception:
                b.kill()
        self.etcd.stop()


def running(c: Cluster) -> Iterator[Cluster]:
    """A fixture's body: `yield from running(Cluster(...))` starts it and stops it after the test."""
    c.start()
    try:
        yield c
    finally:
        c.stop()


def eventually(check: Callable[[], Any], timeout: float = 20.0, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as e:  # clients raise while the cluster moves; keep polling
            last = e
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def wait_for_leaders(bootstrap: str, topic: str, timeout: float = 30.0) -> None:
    """Until Metadata lists every partition of `topic` with a leader. Right after CreateTopics a broker
    may know the topic before its partitions' first states (it opens their logs meanwhile) and answers
    LEADER_NOT_AVAILABLE for them, as Kafka's brokers do; tests that look up a leader wait for this."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})

    def ready() -> bool:
        t = admin.list_topics(topic, timeout=10).topics.get(topic)
        return bool(t is not None and t.error is None and t.partitions) and all(
            p.leader >= 0 for p in t.partitions.values()
        )

    eventually(ready, timeout, f"every partition of {topic} to have a leader")
