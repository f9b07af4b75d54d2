"""Apache Kafka's Java side as a real peer: the Java clients driven from a test, and Kafka's own tools
run by class name with the classpath `scripts/setup-jvm` built (as `bin/kafka-run-class.sh` does).

    with JavaClients(log) as java:
        java.call("producer", name="p", config={"bootstrap.servers": b, "acks": "all"})
        java.call("send", name="p", topic="t", records=[{"key": "k", "value": "v"}])
    kafka_tool("kafka-topics", "--bootstrap-server", b, "--list")
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# Kafka 4.4's bin/*.sh, each a class run by kafka-run-class.sh.
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-share-consumer-perf-test": "org.apache.kafka.tools.ShareConsumerPerformance",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-streams-application-reset": "org.apache.kafka.tools.StreamsResetter",
    "kafka-server-start": "kafka.Kafka",
}

# Small heaps: two cores and many JVMs in one test run; the tools' own default is -Xmx512m.
JVM_OPTS = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]


class JavaError(Exception):
    """An exception the Java client raised: `kind` is its simple class name (e.g.
    "TopicAuthorizationException"), `chain` the class of every cause."""

    def __init__(self, kind: str, message: str, chain: list[str], root: str = "") -> None:
        super().__init__(f"{kind}: {message}" + (f" (root cause {root})" if root and chain[1:] else ""))
        self.kind = kind
        self.message = message
        self.chain = chain


def java_bin() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "java")


def classpath() -> str:
    """The classpath of this checkout's build of tests/jvm (scripts/setup-jvm names it in .venv)."""
    path = REPO / ".venv" / "brook-jvm-classpath.txt"
    if not path.exists():
        raise RuntimeError(f"{path} is missing: run scripts/setup-jvm (scripts/setup --test runs it)")
    return path.read_text().strip()


def java_cmd(main_class: str, *args: str, opts: list[str] | None = None) -> list[str]:
    return [java_bin(), *JVM_OPTS, *(opts or []), "-cp", classpath(), main_class, *args]


def kafka_tool(
    tool: str, *args: str, timeout: float = 120, input: str | None = None, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """Runs one of Kafka's tools (a key of TOOLS) to completion; its output is returned as text."""
    cmd = java_cmd(TOOLS[tool], *args, opts=["-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
    if check and r.returncode != 0:
        raise AssertionError(f"{tool} {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


class JavaClients:
    """One JVM running dev.brook.jvmtest.Driver: the test names clients and calls their methods; each
    call waits for the Java call to return (bounded by `timeout`)."""

    def __init__(self, log_path: Path, jvm_opts: list[str] | None = None) -> None:
        """`jvm_opts`: e.g. system properties the clients read (-Dname=value)."""
        self.log_path = log_path
        self._log = open(log_path, "a")  # noqa: SIM115 - the child's stderr for the test's life
        opts = ["-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", *(jvm_opts or [])]
        self.proc = subprocess.Popen(
            java_cmd("dev.brook.jvmtest.Driver", opts=opts),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self._answers: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._answers.put(line)
        self._answers.put(None)

    def call(self, op: str, timeout: float = 90.0, **args: Any) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        try:
            line = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"the Java client did not answer {op} in {timeout}s") from None
        if line is None:
            raise RuntimeError(f"the Java driver exited ({self.proc.poll()}); log: {self.log_path}")
        answer = json.loads(line)
        if "error" in answer:
            raise JavaError(answer["error"], answer["message"], answer["chain"], answer.get("root", ""))
        return answer["ok"]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write('{"op": "exit"}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def __enter__(self) -> JavaClients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class JvmProcess:
    """A Java program run as a process of its own (a Kafka Streams instance, a Connect worker), so a
    test can kill -9 it: its stdout and stderr go to `log_path`, and `wait_for(text)` watches that log."""

    def __init__(self, log_path: Path, main_class: str, *args: str, opts: list[str] | None = None) -> None:
        self.log_path = log_path
        self.cmd = java_cmd(main_class, *args, opts=["-Xmx384m", *(opts or [])])
        self.proc: subprocess.Popen[bytes] | None = None
        self._offset = 0

    def start(self) -> JvmProcess:
        with open(self.log_path, "ab") as log:
            self._offset = log.tell()
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT)
        return self

    def log(self) -> str:
        """What this run (since the last start) has written."""
        with open(self.log_path, "rb") as f:
            f.seek(self._offset)
            return f.read().decode(errors="replace")

    def wait_for(self, text: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"{self.cmd[-1]} exited before {text!r}; log: {self.log_path}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {text!r} in {timeout}s; log: {self.log_path}")
            time.sleep(0.2)

    def kill(self) -> None:
        """kill -9: the JVM gets no shutdown hook, like a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self, timeout: float = 40.0) -> None:
        """SIGTERM: the program's shutdown hook closes it cleanly."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
