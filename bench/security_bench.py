#!/usr/bin/env python
"""What TLS and SASL cost: produce and fetch throughput and broker CPU over PLAINTEXT, SSL and SASL_SSL
(SCRAM-SHA-512) for 1 KiB records, on one broker process (not a test).

    .venv/bin/python bench/security_bench.py [--records N] [--repeats N] [--kafka]

One `brook broker` with three listeners (PLAINTEXT, SSL, SASL_SSL; trustme certificates, EC P-256,
no client certificates) and a second one with --event-loop uvloop: its PLAINTEXT fetches use pread +
write instead of asyncio's sendfile, so "PLAINTEXT read+write" separates the cost of copying through
Python from the cost of encrypting; its SSL and SASL_SSL rows use uvloop's TLS transport (Cython)
instead of asyncio's sslproto. Each broker first creates __consumer_offsets (a one-off cost of the first
group read, kept out of the rows). For each: a confluent-kafka producer writes --records x 1 KiB
(acks=1, linger.ms=5, batch.size=1 MB) to a fresh topic, then a consumer reads them back; MB/s of
record values and broker CPU-s per GB (/proc/<pid>/stat), best of --repeats with the spread.
Kernel TLS is not measured because Brook cannot use it: see docs/benchmarks.md. With --kafka, Apache
Kafka 4.4 (one KRaft node, -Xmx1g, the same three listeners, PEM keystore, SCRAM-SHA-512) is measured
in the same run, in the same rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trustme
from confluent_kafka.admin import (  # type: ignore[attr-defined, unused-ignore]
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from cryptography.hazmat.primitives import serialization

import raw  # the sibling module (bench/ is on sys.path when run as a script)
from broker_bench import (
    REPO,
    Measurement,
    Meter,
    Sample,
    confluent_consume,
    delivery_producer,
    free_port,
    machine_info,
    p50_p99_ms,
    print_table,
    produce_all,
    warm_memory,
)

RECORD = 1024
USER, PASSWORD = "bench", "bench-secret"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")


class KafkaBroker:
    """Apache Kafka 4.4 beside Brook: one KRaft node with the same three listeners."""

    def __init__(self, work: Path, certs: Path) -> None:
        if str(REPO) not in sys.path:  # tests.support, for the Kafka peer the tests use too
            sys.path.insert(0, str(REPO))
        from tests.support.kafka_peer import KafkaPeer

        self.peer = KafkaPeer(work / "kafka", nodes=1, heap="1g")
        node = self.peer.nodes[0]
        self.ports = {"PLAINTEXT": node.port, "SSL": free_port(), "SASL_SSL": free_port()}
        listeners = ",".join(f"{p}://127.0.0.1:{port}" for p, port in self.ports.items())
        self.peer.config = {
            "listeners": f"{listeners},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": listeners,
            "listener.security.protocol.map":
                "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs / "server-pkcs8.pem"),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        }  # fmt: skip

    def start(self) -> KafkaBroker:
        self.peer.start()
        _add_user(self.address("PLAINTEXT"))
        return self

    @property
    def pid(self) -> int:
        return self.peer.pids()[1]

    def address(self, protocol: str) -> str:
        return f"127.0.0.1:{self.ports[protocol]}"

    def stop(self) -> None:
        self.peer.stop()


def _add_user(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    for f in admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(USER, info, PASSWORD.encode())]
    ).values():
        f.result(30)


class Broker:
    def __init__(self, work: Path, certs: Path, event_loop: str) -> None:
        self.ports = {p: free_port() for p in PROTOCOLS}
        self.log = work / f"broker-{event_loop}.log"
        self.cmd = [
            sys.executable, "-m", "brook.cli", "--log-level", "WARNING", "broker",
            "--data-dir", str(work / f"data-{event_loop}"), "--event-loop", event_loop,
            "--listeners", ",".join(f"{p}://127.0.0.1:{port}" for p, port in self.ports.items()),
            "--ssl-keystore-location", str(certs / "server.pem"),
            "--sasl-enabled-mechanisms", "SCRAM-SHA-512", "--metrics-port", "-1",
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Broker:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=log, cwd=REPO)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if b"bootstrap:" not in line:
            raise RuntimeError(f"broker did not start; see {self.log}")
        _add_user(self.address("PLAINTEXT"))
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def address(self, protocol: str) -> str:
        return f"127.0.0.1:{self.ports[protocol]}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def client_conf(broker: Broker | KafkaBroker, protocol: str, certs: Path) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": broker.address(protocol), "security.protocol": protocol}
    if "SSL" in protocol:
        conf["ssl.ca.location"] = str(certs / "ca.pem")
    if protocol.startswith("SASL"):
        conf.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD})
    return conf


def produce(conf: dict[str, Any], pid: int, topic: str, count: int) -> Sample:
    producer, latencies, failed = delivery_producer(
        {**conf, "linger.ms": 5, "batch.size": 1_000_000, "acks": "1", "compression.type": "none",
         "queue.buffering.max.messages": 1_000_000}
    )  # fmt: skip
    producer.list_topics(topic, timeout=10)
    with Meter(pid) as m:
        produce_all(producer, topic, os.urandom(RECORD), count)
        left = producer.flush(300)
        sample = m.sample(count * RECORD, count)
    sample.p50_ms, sample.p99_ms = p50_p99_ms(latencies, failed, left, count)
    return sample


def consume(conf: dict[str, Any], pid: int, topic: str, count: int) -> Sample:
    return confluent_consume(conf["bootstrap.servers"], pid, topic, count, RECORD, conf)


def warm_up(b: Broker | KafkaBroker, certs: Path) -> None:
    """One small produce and group read first: the first group read creates __consumer_offsets (50
    partitions, files and fsyncs), a one-off cost that would otherwise land in the first fetch row."""
    admin = AdminClient({"bootstrap.servers": b.address("PLAINTEXT")})
    admin.create_topics([NewTopic("warm-up", 1, 1)])["warm-up"].result(30)
    conf = client_conf(b, "PLAINTEXT", certs)
    produce(conf, b.pid, "warm-up", 1_000)
    consume(conf, b.pid, "warm-up", 1_000)


def make_certs(directory: Path) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(directory / "server.pem"))
    # Kafka's PEM keystore reads PKCS#8 keys only.
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    pkcs8 = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    chain = b"".join(blob.bytes() for blob in cert.cert_chain_pems)
    (directory / "server-pkcs8.pem").write_bytes(pkcs8 + chain)


def run(args: argparse.Namespace) -> list[Measurement]:
    work = Path(tempfile.mkdtemp(prefix="brook-secbench-", dir=args.tmp))
    make_certs(work)
    cases = [(p, "asyncio", p) for p in PROTOCOLS] + [("PLAINTEXT", "uvloop", "PLAINTEXT read+write")]
    cases += [(p, "uvloop", f"{p} uvloop") for p in PROTOCOLS if p != "PLAINTEXT"]
    if args.kafka:
        cases += [(p, "kafka", f"Kafka {p}") for p in PROTOCOLS]
    prod = {name: Measurement("produce", f"{name}, {args.records:,} x 1 KiB, acks=1") for *_, name in cases}
    fetch = {name: Measurement("fetch", f"{name}, {args.records:,} x 1 KiB") for *_, name in cases}
    brokers: dict[str, Broker | KafkaBroker] = {}
    try:
        for loop in ("asyncio", "uvloop"):
            brokers[loop] = b = Broker(work, work, loop).start()
            warm_up(b, work)
        if args.kafka:
            brokers["kafka"] = k = KafkaBroker(work, work).start()
            warm_up(k, work)
        for r in range(args.repeats):
            for protocol, loop, name in cases:
                b = brokers[loop]
                topic = f"t-{name.replace(' ', '-').replace('+', '')}-{r}"
                admin = AdminClient({"bootstrap.servers": b.address("PLAINTEXT")})
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                conf = client_conf(b, protocol, work)
                warm_memory(work, 2 * args.records * RECORD)
                s = produce(conf, b.pid, topic, args.records)
                prod[name].samples.append(s)
                print(f"  produce {name}: {s.mb_s:.1f} MB/s, {s.cpu_per_gb:.2f} CPU-s/GB", flush=True)
                s = consume(conf, b.pid, topic, args.records)
                fetch[name].samples.append(s)
                print(f"  fetch   {name}: {s.mb_s:.1f} MB/s, {s.cpu_per_gb:.2f} CPU-s/GB", flush=True)
    finally:
        for b in brokers.values():
            b.stop()
        with contextlib.suppress(OSError):
            shutil.rmtree(work)
    return [*prod.values(), *fetch.values()]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=300_000, help="1 KiB records per run (default 300,000)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tmp", default=None, help="parent of the temporary data directory")
    p.add_argument("--kafka", action="store_true", help="also Apache Kafka 4.4, in the same rounds")
    args = p.parse_args(argv)
    machine = machine_info()
    print(machine, flush=True)
    results = run(args)
    print_table(results)
    best = {(m.name, m.detail.split(",")[0]): max(s.mb_s for s in m.samples) for m in results if m.samples}
    for kind in ("produce", "fetch"):
        plain = best[(kind, "PLAINTEXT")]
        for proto in ("SSL", "SASL_SSL"):
            print(f"{kind} {proto}: {100 * (1 - best[(kind, proto)] / plain):.0f} % below PLAINTEXT")
    raw.save("security_bench", machine, results)
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
