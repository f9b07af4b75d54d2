"""Runs librdkafka's own integration tests (the team's conformance kit in ../shared) against Brook.

    scripts/conformance                      # every test in broker-tests.txt on one broker, then the
                                             # no-auto-create tests (0107, 0111: they create topics
                                             # with 3 replicas) on 3 brokers that do not auto-create
    scripts/conformance 0054 0081 0102       # some tests
    scripts/conformance --cluster 0101 0102  # on etcd + 3 brokers in racks RACK0..RACK2; no test
                                             # ids: the list's cluster set
    scripts/conformance --against kafka 0081 # the same tests against Apache Kafka 4.4 (KRaft, 1 node
                                             # or 3, -Xmx1g), set up as trivup sets up Kafka for them
    scripts/conformance --rebalance-delay-ms 3000 0081   # every broker with this initial delay
Tests of features Brook does not have yet (none today) are left out unless --all. The SSL and SASL
tests (0097, 0135, 0142) run on a broker with SSL and SASL_SSL listeners with a test.conf of their own
(conformance_secure.py), and 0126 (OAUTHBEARER/OIDC) against a test identity provider
(conformance_oidc.py): the kit's `run` cannot pass them security settings.

It starts what it tests: fresh brokers on free loopback ports, replaced every --fresh-every tests
(some tests leave hundreds of topics behind), as the kit's README asks. The kit's `run` script runs
each test alone with a time limit and prints one RESULT line per test; this prints them as they come
and a total, `N passed, M failed, K skipped`, and exits 1 when any test failed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from . import kafka_dist
from .broker import BrokerProcess
from .cluster import Cluster
from .conformance_oidc import OIDC_TESTS, oidc_runner, run_oidc
from .conformance_secure import (
    SECURE_BROKERS,
    SECURE_TESTS,
    client_conf,
    make_secrets,
    run_test,
    secure_brook,
)
from .kafka_peer import KafkaPeer, librdkafka_harness

REPO = Path(__file__).resolve().parents[2]
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
# Tests that only pass against a broker that does not create topics on Metadata requests.
NO_AUTOCREATE = ("0107", "0111")
# Tests that need 3 brokers whatever the run (they create topics with 3 replicas; 0101 in 3 racks).
CLUSTER_ONLY = ("0098", "0101", "0103")
# Tests no Brook run can pass whatever it does (none today).
NOT_RUNNABLE: dict[str, str] = {}
# Tests for what Brook does not have yet; --all runs them.
NOT_YET: dict[str, str] = {}
# Tests that shell out to Kafka's bin/kafka-topics.sh, kafka-acls.sh or kafka-run-class.sh (0098 runs
# its Java transactional producer; broker-tests.txt leaves them out): they get KAFKA_PATH, a directory
# shaped like Kafka's distribution over the real Kafka 4.4 jars (tests/support/kafka_dist.py).
KAFKA_TOOLS = ("0052", "0077", "0098", "0109", "0115", "0119")
# Of those, the ones that deny ANONYMOUS with ACLs: an authorizer that allows everything no ACL covers
# and no super user (trivup's set-up), instead of the other runs' ANONYMOUS super user.
ACL_DENYING = ("0109", "0115", "0119")
# Tests that take longer than the kit's default 300 s limit against any broker (many session timeouts).
LONG = {"0113": 1200}
# Tests run against a broker with Kafka's config/server.properties value group.initial.rebalance.delay.ms=0
# (Kafka's default, 3 s, is for production): 0081 joins a dozen fresh groups within its own 180 s limit.
# 0113 needs the 3 s (its first consumers must join one rebalance), so it is not one of them.
NO_REBALANCE_DELAY = ("0081",)
_RESULT = re.compile(r"^RESULT (\S+) (PASS|FAIL|TIMEOUT|SKIP)\b")


def kit_dir() -> Path:
    kit = Path(os.environ.get("BROOK_CONFORMANCE_KIT", REPO.parent / "shared" / "conformance" / "librdkafka"))
    if not (kit / "run").is_file():
        sys.exit(f"conformance: no librdkafka kit at {kit} (set BROOK_CONFORMANCE_KIT to its directory)")
    return kit


def listed_tests(kit: Path, cluster: bool) -> list[str]:
    """Test ids of broker-tests.txt (lines starting with '#' are tests no external broker can run);
    for a cluster, those the list gives a cluster result for (its 'single/cluster' column)."""
    ids = []
    for line in (kit / "broker-tests.txt").read_text().splitlines():
        cols = line.split()
        if cols and not line.lstrip().startswith("#") and (not cluster or "/" in cols[2]):
            ids.append(cols[0])
    return ids


@contextmanager
def brook(
    root: Path, brokers: int, auto_create: bool, extra: tuple[str, ...] = (), acl_denying: bool = False
) -> Iterator[str]:
    """Yields the bootstrap of a fresh single broker, or of etcd + N racked brokers."""
    # An authorizer with the tests' ANONYMOUS principal as a super user: the ACL APIs work (0081)
    # and nothing else is refused. Tests that deny with ACLs get an authorizer that allows what no
    # ACL covers instead.
    base = [
        *("--auto-create-topics", "true" if auto_create else "false", "--num-partitions", "4"),
        *("--authorizer-class-name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
        *(
            ("--allow-everyone-if-no-acl-found", "true")
            if acl_denying
            else ("--super-users", "User:ANONYMOUS")
        ),
    ]
    if brokers == 1:
        single = BrokerProcess(root / "broker", args=[*base, *extra]).start()
        try:
            yield single.bootstrap
        finally:
            single.stop(timeout=30)
        return
    # Racks as 0101 expects (RACK<id>) and Kafka's rack-aware selector for fetch-from-follower.
    cluster = Cluster(
        root,
        brokers,
        # Kafka's default initial rebalance delay (the test cluster's 0 splits 0113's first joins).
        extra_args=[
            *base,
            "--replica-selector-class",
            RACK_AWARE,
            "--group-initial-rebalance-delay-ms",
            "3000",
            *extra,
        ],
        node_args=lambda i: ["--rack", f"RACK{i}"],
    )
    try:
        yield cluster.start().bootstrap
    finally:
        cluster.stop()


@contextmanager
def kafka(root: Path, brokers: int, auto_create: bool, extra: tuple[str, ...] = ()) -> Iterator[str]:
    """Yields the bootstrap of Apache Kafka (1 or N KRaft nodes) as trivup sets it up for librdkafka:
    4 partitions, an authorizer that allows what no ACL covers. `extra`: Brook flags, translated."""
    config = librdkafka_harness() | {"auto.create.topics.enable": str(auto_create).lower()}
    flags = dict(zip(extra[::2], extra[1::2], strict=True))
    if "--group-initial-rebalance-delay-ms" in flags:
        config["group.initial.rebalance.delay.ms"] = flags["--group-initial-rebalance-delay-ms"]
    with KafkaPeer(root, nodes=brokers, heap="1g", config=config).start() as peer:
        yield peer.bootstrap


def run_batch(
    kit: Path, bootstrap: str, tests: list[str], scenario: str, timeout: int, tools: Path | None = None
) -> dict[str, str]:
    env = {**os.environ, "TEST_SCENARIO": scenario, "TIMEOUT": str(timeout)}
    if tools is not None:  # tests run $KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server $BROKERS ...
        env |= {"KAFKA_PATH": str(tools), "BROKERS": bootstrap}
    if any(t in KAFKA_TOOLS for t in tests):
        # Each kafka-*.sh is a JVM start (~1.5 s here); librdkafka's CI, where these tests run against
        # Kafka, sets CI, which triples the tests' time limits (test.c: test_on_ci). 0119's 20 s hold a
        # 15 s consume loop and four kafka-acls.sh runs.
        env |= {"CI": "true"}
    results: dict[str, str] = {}
    proc = subprocess.Popen([str(kit / "run"), bootstrap, *tests], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:
        m = _RESULT.match(line)
        if m:
            print(line, end="", flush=True)
            results[m.group(1)] = m.group(2)
    proc.wait()
    return results


def _runner(kit: Path) -> Path:
    """The kit's test-runner (its build prints the path; a no-op once built)."""
    return Path(
        subprocess.run([str(kit / "build")], check=True, capture_output=True, text=True).stdout.split()[-1]
    )


def _logs() -> Path:
    return Path(os.environ.get("CONFORMANCE_DIR", Path.home() / ".cache" / "brook-conformance")) / "logs"


def run_secure(kit: Path, root: Path, tests: list[str], timeout: int) -> dict[str, str]:
    """0097/0135/0142, each on fresh brokers with SSL and SASL_SSL listeners."""
    runner = _runner(kit)
    secrets = make_secrets(root / "certs")
    logs = _logs()
    results = {}
    base = [
        *("--auto-create-topics", "true", "--num-partitions", "4"),
        *("--authorizer-class-name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
    ]
    for t in tests:
        with secure_brook(root / t, secrets, base, SECURE_BROKERS[t]) as broker:
            results[t] = run_test(runner, t, client_conf(t, broker, secrets), secrets.env, timeout, logs)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/conformance", description=__doc__.split("\n\n")[0])
    p.add_argument("tests", nargs="*", help="test ids (default: all of broker-tests.txt)")
    p.add_argument("--cluster", action="store_true", help="etcd + 3 brokers in racks RACK0..RACK2")
    p.add_argument("--fresh-every", type=int, default=20, help="tests per fresh broker (default 20)")
    p.add_argument("--all", action="store_true", help="also the tests of features Brook does not have yet")
    p.add_argument("--timeout", type=int, default=300, help="seconds per test (default 300; 0113: 1200)")
    p.add_argument("--against", choices=["brook", "kafka"], default="brook", help="the broker under test")
    p.add_argument(
        "--rebalance-delay-ms", type=int, default=None, help="group.initial.rebalance.delay.ms of every run"
    )
    a = p.parse_args(argv)
    kit = kit_dir()
    subprocess.run([str(kit / "build")], check=True, stdout=subprocess.DEVNULL)
    tests = a.tests or listed_tests(kit, a.cluster)
    if not a.tests:
        tests += [*NO_AUTOCREATE, *(KAFKA_TOOLS if not a.cluster else ())]
        left = [t for t in tests if t in NOT_RUNNABLE]
        if left:
            print("not runnable here: " + ", ".join(f"{t} ({NOT_RUNNABLE[t]})" for t in left), flush=True)
        tests = [t for t in tests if t not in NOT_RUNNABLE]
        if not a.all:
            left = [t for t in tests if t in NOT_YET]
            if left:
                print(
                    "not run (features Brook lacks; --all runs them): "
                    + ", ".join(f"{t} ({NOT_YET[t]})" for t in left),
                    flush=True,
                )
            tests = [t for t in tests if t not in NOT_YET]
    # Group the tests into runs that share fresh brokers: no-auto-create ones need a cluster of their own,
    # long ones run alone with their own time limit.
    runs: list[tuple[bool, int, list[str], int, tuple[str, ...]]] = []
    apart = (
        *NO_AUTOCREATE,
        *CLUSTER_ONLY,
        *LONG,
        *NO_REBALANCE_DELAY,
        *SECURE_TESTS,
        *ACL_DENYING,
        *OIDC_TESTS,
    )
    for auto, brokers, ids in (
        (True, 3 if a.cluster else 1, [t for t in tests if t not in apart]),
        (True, 3, [t for t in tests if t in CLUSTER_ONLY]),
        (False, 3, [t for t in tests if t in NO_AUTOCREATE]),
        (True, 3 if a.cluster else 1, [t for t in tests if t in ACL_DENYING]),
    ):
        runs += [
            (auto, brokers, ids[i : i + a.fresh_every], a.timeout, ())
            for i in range(0, len(ids), a.fresh_every)
        ]
    single = 3 if a.cluster else 1
    runs += [(True, single, [t], max(a.timeout, LONG[t]), ()) for t in tests if t in LONG]
    no_delay = ("--group-initial-rebalance-delay-ms", "0")
    runs += [(True, single, [t], a.timeout, no_delay) for t in tests if t in NO_REBALANCE_DELAY]
    results: dict[str, str] = {}
    secure = [t for t in tests if t in SECURE_TESTS]
    with tempfile.TemporaryDirectory(prefix="brook-conformance-") as tmp:
        tools = kafka_dist.install(Path(tmp) / "kafka")
        for n, (auto, brokers, ids, timeout, extra) in enumerate(runs):
            acl_denying = all(t in ACL_DENYING for t in ids)
            if a.rebalance_delay_ms is not None:
                extra = (*extra, "--group-initial-rebalance-delay-ms", str(a.rebalance_delay_ms))
            under_test = (
                kafka(Path(tmp) / f"run-{n}", brokers, auto, extra)
                if a.against == "kafka"
                else brook(Path(tmp) / f"run-{n}", brokers, auto, extra, acl_denying)
            )
            with under_test as bootstrap:
                scenario = "default" if auto else "noautocreate"
                results |= run_batch(kit, bootstrap, ids, scenario, timeout, tools)
        if a.against == "kafka" and (secure or "0126" in tests):
            print("not run against Kafka: the SSL, SASL and OIDC tests (their set-up is Brook's)", flush=True)
            secure, tests = [], [t for t in tests if t != "0126"]
        if secure:
            results |= run_secure(kit, Path(tmp) / "secure", secure, a.timeout)
        if "0126" in tests:
            results |= run_oidc(oidc_runner(kit), Path(tmp) / "oidc", a.timeout, _logs())
    counts = {s: sum(1 for v in results.values() if v == s) for s in ("PASS", "FAIL", "TIMEOUT", "SKIP")}
    missing = [t for t in tests if t not in results]
    failed = counts["FAIL"] + counts["TIMEOUT"] + len(missing)
    if missing:
        print(f"no result for: {' '.join(missing)}", flush=True)
    print(f"{counts['PASS']} passed, {failed} failed, {counts['SKIP']} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
