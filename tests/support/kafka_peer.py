"""Apache Kafka 4.4 itself as a peer on loopback: KRaft, each node a combined broker and controller, 1 or
N nodes on free 127.0.0.1 ports, from the jars `scripts/setup-jvm` resolved (tests/support/jvm.py).

    with KafkaPeer(tmp / "kafka", nodes=3, heap="1g").start() as kafka:
        kafka.bootstrap          # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
        kafka.pids()             # {node id: pid}: CPU and RSS from /proc, as for Brook's brokers

Each node is `kafka.Kafka server.properties` after `kafka-storage format` (StorageTool) of its log
directory with one cluster id; the controllers are a static quorum (controller.quorum.voters). The JVM
options are those of Kafka's bin/kafka-server-start.sh (G1, 20 ms pause target) with the heap stated:
Kafka's own default is -Xmx1G -Xms1G. `librdkafka_harness()` gives the settings librdkafka's test
harness (trivup) gives Kafka; `TEST_TIMINGS` the short timings of Brook's test brokers.
Start-up on a 2-core machine under load: one node 7-15 s (format included), three nodes 22-24 s.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

from .jvm import classpath, java_bin, java_cmd
from .ports import free_port

# What bin/kafka-server-start.sh and kafka-run-class.sh give the broker's JVM besides the heap.
KAFKA_JVM_OPTS = [
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

# Brook's test brokers form groups at once and keep internal topics small (tests/conftest.py GROUP_ARGS).
TEST_TIMINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "10",
}


def librdkafka_harness(partitions: int = 4) -> dict[str, str]:
    """The broker settings trivup gives Kafka for librdkafka's default test scenario: topics
    auto-created with 4 partitions, an authorizer that allows what no ACL covers, and Kafka's default
    3 s group.initial.rebalance.delay.ms (not set here)."""
    return {
        "auto.create.topics.enable": "true",
        "num.partitions": str(partitions),
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "allow.everyone.if.no.acl.found": "true",
    }


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (kafka-storage random-uuid)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class KafkaNode:
    def __init__(self, root: Path, node_id: int) -> None:
        self.node_id = node_id
        self.port = free_port()
        self.controller_port = free_port()
        self.dir = root / f"node-{node_id}"
        self.log_dir = self.dir / "data"
        self.config_path = self.dir / "server.properties"
        self.log_path = self.dir / "kafka.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class KafkaPeer:
    def __init__(
        self,
        root: Path,
        nodes: int = 1,
        heap: str = "512m",
        config: dict[str, str] | None = None,
        jvm_opts: list[str] | None = None,
    ) -> None:
        """`config` overrides or adds to the nodes' server.properties (Kafka's names). `heap` is -Xmx and
        -Xms. `jvm_opts` replace Kafka's own (KAFKA_JVM_OPTS)."""
        self.root = root
        self.heap = heap
        self.cluster_id = new_cluster_id()
        self.nodes = [KafkaNode(root, i + 1) for i in range(nodes)]
        self.config = config or {}
        self.jvm_opts = KAFKA_JVM_OPTS if jvm_opts is None else jvm_opts
        self.started_in: float | None = None  # seconds from the first format to every node serving

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes if n.alive())

    def pids(self) -> dict[int, int]:
        return {n.node_id: n.proc.pid for n in self.nodes if n.proc is not None and n.alive()}

    def properties(self, node: KafkaNode) -> dict[str, str]:
        n = len(self.nodes)
        voters = ",".join(f"{m.node_id}@127.0.0.1:{m.controller_port}" for m in self.nodes)
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.log_dir),
            # Internal topics as replicated as the cluster allows (Kafka's defaults assume 3 brokers).
            "offsets.topic.replication.factor": str(min(3, n)),
            "transaction.state.log.replication.factor": str(min(3, n)),
            "transaction.state.log.min.isr": str(min(2, n)),
            "share.coordinator.state.topic.replication.factor": str(min(3, n)),
            "share.coordinator.state.topic.min.isr": str(min(2, n)),
        }
        return props | self.config

    def _write_config(self, node: KafkaNode) -> None:
        node.dir.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{k}={v}\n" for k, v in self.properties(node).items())
        node.config_path.write_text(text)

    def _format(self, node: KafkaNode) -> subprocess.Popen[bytes]:
        cmd = java_cmd(
            "kafka.tools.StorageTool",
            *("format", "-t", self.cluster_id, "-c", str(node.config_path)),
            opts=["-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"],
        )
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self, timeout: float = 120.0) -> KafkaPeer:
        """Formats every node's storage (in parallel), starts them, and returns once each serves and
        the cluster's metadata lists every node. On failure, stops what started."""
        t0 = time.monotonic()
        try:
            for node in self.nodes:
                self._write_config(node)
            formats = [(n, self._format(n)) for n in self.nodes]
            for node, proc in formats:
                _, err = proc.communicate(timeout=timeout)
                if proc.returncode != 0:
                    raise RuntimeError(f"kafka-storage format of node {node.node_id} failed:\n{err.decode()}")
            for node in self.nodes:
                self._launch(node)
            deadline = t0 + timeout
            for node in self.nodes:
                self._wait_started(node, deadline)
            self._wait_brokers(deadline)
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - t0
        return self

    def relaunch(self, timeout: float = 600.0) -> float:
        """Start the stopped (or killed) nodes again on their data, without formatting; the seconds until
        each logs that it started (its logs loaded, recovered if it did not shut down cleanly) and the
        cluster lists every node."""
        t0 = time.monotonic()
        marks = {n.node_id: n.log_path.stat().st_size if n.log_path.exists() else 0 for n in self.nodes}
        for node in self.nodes:
            self._launch(node)
        deadline = t0 + timeout
        for node in self.nodes:
            self._wait_started(node, deadline, since=marks[node.node_id])
        self._wait_brokers(deadline)
        return time.monotonic() - t0

    def kill(self) -> None:
        """SIGKILL every node (no controlled shutdown, no clean-shutdown file)."""
        for node in self.nodes:
            if node.proc is not None and node.alive():
                node.proc.kill()
                node.proc.wait(10)

    def _launch(self, node: KafkaNode) -> None:
        cmd = [
            java_bin(),
            f"-Xmx{self.heap}",
            f"-Xms{self.heap}",
            *self.jvm_opts,
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp",
            classpath(),
            "kafka.Kafka",
            str(node.config_path),
        ]
        with open(node.log_path, "ab") as log:
            node.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _wait_started(self, node: KafkaNode, deadline: float, since: int = 0) -> None:
        while time.monotonic() < deadline:
            if not node.alive():
                raise RuntimeError(f"Kafka node {node.node_id} exited; {node.log_path}:\n{self.tail(node)}")
            if node.log_path.exists() and b"Kafka Server started" in node.log_path.read_bytes()[since:]:
                return
            time.sleep(0.2)
        raise TimeoutError(f"Kafka node {node.node_id} did not start; {node.log_path}:\n{self.tail(node)}")

    def _wait_brokers(self, deadline: float) -> None:
        from kafka.protocol.metadata import MetadataRequest

        from .raw import RawClient

        want = {n.node_id for n in self.nodes}
        seen: set[int] = set()
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), RawClient(self.nodes[0].bootstrap) as c:
                seen = {b.node_id for b in c.request(MetadataRequest(topics=[]), 12).brokers}
                if seen == want:
                    return
            time.sleep(0.2)
        raise TimeoutError(f"Kafka's metadata lists brokers {sorted(seen)}, not {sorted(want)}")

    def tail(self, node: KafkaNode, chars: int = 3000) -> str:
        return node.log_path.read_text(errors="replace")[-chars:] if node.log_path.exists() else ""

    def rss_bytes(self) -> dict[int, int]:
        """Each live node's resident set (VmRSS)."""
        out = {}
        for node_id, pid in self.pids().items():
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out[node_id] = int(line.split()[1]) * 1024
        return out

    def stop_node(self, node: KafkaNode, timeout: float = 30.0) -> None:
        """SIGTERM (Kafka's controlled shutdown), then SIGKILL if it does not exit in `timeout`."""
        if node.proc is None or node.proc.poll() is not None:
            return
        node.proc.send_signal(signal.SIGTERM)
        try:
            node.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            node.proc.kill()
            node.proc.wait(10)

    def stop(self, timeout: float = 30.0) -> None:
        # A node's controlled shutdown waits for the controller quorum: signal all, then wait for each.
        for node in self.nodes:
            if node.alive():
                assert node.proc is not None
                with contextlib.suppress(ProcessLookupError):
                    os.kill(node.proc.pid, signal.SIGTERM)
        for node in self.nodes:
            self.stop_node(node, timeout)

    def __enter__(self) -> KafkaPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """`python -m tests.support.kafka_peer --nodes 3`: starts Kafka, prints where, runs until Ctrl-C."""
    import argparse
    import tempfile

    p = argparse.ArgumentParser(prog="python -m tests.support.kafka_peer", description=main.__doc__)
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--heap", default="1g", help="-Xmx and -Xms (default 1g, Kafka's own)")
    p.add_argument("--librdkafka-harness", action="store_true", help="trivup's settings for librdkafka")
    p.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE")
    a = p.parse_args(argv)
    config = librdkafka_harness() if a.librdkafka_harness else {}
    config |= dict(kv.split("=", 1) for kv in a.config)
    with (
        tempfile.TemporaryDirectory(prefix="kafka-peer-") as tmp,
        KafkaPeer(Path(tmp), a.nodes, a.heap, config).start() as kafka,
    ):
        print(f"Kafka 4.4, {a.nodes} node(s), heap {a.heap}, started in {kafka.started_in:.1f} s", flush=True)
        for n in kafka.nodes:
            print(f"node {n.node_id}: {n.bootstrap} (pid {n.proc.pid if n.proc else '-'}, log {n.log_path})")
        print(f"bootstrap: {kafka.bootstrap}", flush=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})


if __name__ == "__main__":
    main()
