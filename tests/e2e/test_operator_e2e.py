"""The operator end to end, with real processes only: a real Kubernetes control plane
(tests/e2e/controlplane: kube-apiserver, controller-manager, scheduler), the pod runner as its node
agent (tests/e2e/podrunner: the pods the real StatefulSet controller makes and the scheduler places on
its nodes become local `brook broker` and `etcd` processes on 127.0.0.1, Services are proxied), the real
`brook-operator run` (kopf) as a subprocess authenticated as its ServiceAccount from manifests/ (never
as admin: a verb missing from manifests/rbac.yaml fails a step), and confluent-kafka clients.

The scenario, in order (the steps share one cluster; each step is a test):
kubectl apply the example Cluster (managed etcd, rack awareness; only the listener port changed to a
free one) → three brokers run and the Cluster turns Ready → kubectl apply a Topic → the topic exists
with its partitions → produce (acks=all, idempotent) and consume → kubectl scale the Cluster → the
StatefulSet follows and a 4th broker registers → a config change rolls the brokers one at a time
(controller last) while a producer writes, and every acknowledged record is read back → kubectl
delete the Topic → the topic is gone → a Topic annotated brook.dev/keep-topic-on-delete: deleting
the resource keeps the topic.

How the operator reaches the brokers from outside a cluster network: `--bootstrap-template
127.0.0.1:{port}` with `{port}` the Cluster's listener port, where the runner's proxy of the
`demo-bootstrap` Service listens (it forwards to a ready broker); brokers advertise 127.0.0.1 and
their own host port (the runner rewrites BROOK_PORT and resolves the pod DNS name of
BROOK_ADVERTISED_HOST), so clients connect to each broker directly after bootstrapping, as in a
cluster. No operator code path is specific to the test.

Run: `PATH=$PWD/.venv/bin:$PATH pytest -q tests/e2e/test_operator_e2e.py` (about a minute).
Logs: the runner's pods under the module's tmp dir (`pods/<ns>/<pod>-<uid>/logs/<container>.log`),
the operator's in `operator.log` next to them; both are printed when a step fails.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import Kube
from tests.e2e.operator_harness import REPO, install_operator, operator_process, start_runner, tail
from tests.e2e.podrunner import Event, RunnerThread
from tests.e2e.podrunner.podspec import expand, rewrite_network, rewrite_paths
from tests.e2e.podrunner.ports import PortAllocator

NS = "brook"
CLUSTER = "demo"
STS = f"{CLUSTER}-broker"
REVISION = "brook.dev/revision"
ZONE = "topology.kubernetes.io/zone"
INDEX = "apps.kubernetes.io/pod-index"

# ================================================================ pure parts of the runner (fast)


def test_env_expansion_follows_kubernetes() -> None:
    env = {"POD": "demo-broker-1", "EMPTY": ""}
    assert expand("$(POD).demo-brokers.ns.svc", env) == "demo-broker-1.demo-brokers.ns.svc"
    assert expand("$(MISSING)-$(EMPTY)x", env) == "$(MISSING)-x"
    assert expand("$$(POD) costs $$5", env) == "$(POD) costs $5"


def test_network_rewrites_give_each_pod_its_own_ports() -> None:
    ports = PortAllocator(low=20000, high=20100, seed=1)
    own = {2379: ports.pod_port("ns", "demo-etcd-0", 2379)}
    peer1 = ports.pod_port("ns", "demo-etcd-1", 2380)
    text = "--listen-client-urls=http://0.0.0.0:2379 --peer=http://demo-etcd-1.demo-etcd.ns.svc:2380"
    out = rewrite_network(text, "ns", "demo-etcd-0", own, ports)
    assert out == f"--listen-client-urls=http://0.0.0.0:{own[2379]} --peer=http://127.0.0.1:{peer1}"
    # a pod's DNS name alone, and a Service's name (its proxy keeps the Service port)
    assert rewrite_network("demo-broker-0.demo-brokers.ns.svc", "ns", "x", {}, ports) == "127.0.0.1"
    assert rewrite_network("demo-bootstrap.ns.svc:9092", "ns", "x", {}, ports) == "127.0.0.1:9092"
    # the same pod and port always get the same host port (a restarted pod keeps its address)
    assert ports.pod_port("ns", "demo-etcd-1", 2380) == peer1


def test_mount_paths_become_local_directories() -> None:
    mounts = [
        ("/var/lib/brook", Path("/data/pvc")),
        ("/var/run/brook", Path("/pod/rack")),
        ("/tmp", Path("/tmp/pod/tmp")),
    ]
    assert rewrite_paths("/var/lib/brook/data", mounts) == "/data/pvc/data"
    assert rewrite_paths("/tmp/x:/var/lib/brook", mounts) == "/tmp/pod/tmp/x:/data/pvc"
    assert rewrite_paths("--output /var/run/brook/rack", mounts) == "--output /pod/rack/rack"
    assert rewrite_paths("/var/lib/brookish", mounts) == "/var/lib/brookish"


# ================================================================ the scenario (real processes)


@dataclass
class Brook:
    kube: Kube
    runner: RunnerThread
    bootstrap: str  # the bootstrap Service's proxy
    workdir: Path
    operator_log: Path
    facts: dict[str, Any] = field(default_factory=dict)  # carried from step to step

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 30) -> str:
        return self.kube.kubectl(*args, "-n", NS, input=input, timeout=timeout).stdout

    def get(self, *what: str) -> Any:
        return json.loads(self.kubectl("get", *what, "-o", "json"))

    def cluster(self) -> dict[str, Any]:
        out: dict[str, Any] = self.get("cluster", CLUSTER)
        return out

    def broker_pods(self) -> list[dict[str, Any]]:
        items = self.get(
            "pods", "-l", f"app.kubernetes.io/instance={CLUSTER},app.kubernetes.io/component=broker"
        )
        return sorted(
            items["items"], key=lambda p: int(p["metadata"]["labels"]["apps.kubernetes.io/pod-index"])
        )

    def wait(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        return self.kube.wait_for(predicate, timeout=timeout, interval=0.5, what=what)

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})

    def topics(self) -> dict[str, Any]:
        md = self.admin().list_topics(timeout=10)
        return {k: v for k, v in md.topics.items() if not k.startswith("__")}


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def _ready(pod: dict[str, Any]) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and _condition(pod, "Ready").get("status") == "True"


def _cluster_manifest(port: int) -> str:
    """The example Cluster, in the test namespace, listening on a free port (the proxy's)."""
    doc = yaml.safe_load((REPO / "manifests" / "examples" / "cluster.yaml").read_text())
    doc["metadata"]["namespace"] = NS
    doc["spec"]["listeners"] = [{"name": "plain", "port": port}]
    return json.dumps(doc)


def _topic(name: str, partitions: int, rf: int, keep: bool = False) -> str:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if keep:
        meta["annotations"] = {"brook.dev/keep-topic-on-delete": "true"}
    return json.dumps(
        {
            "apiVersion": "brook.dev/v1alpha1",
            "kind": "Topic",
            "metadata": meta,
            "spec": {
                "cluster": CLUSTER,
                "partitions": partitions,
                "replicationFactor": rf,
                "config": {"min.insync.replicas": 2},
            },
        }
    )


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        alive.append(pid)
    return alive


@pytest.fixture(scope="module")
def brook(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brook]:
    pytest.importorskip("confluent_kafka")
    pytest.importorskip("kopf")
    workdir = tmp_path_factory.mktemp("operator-e2e")
    install_operator(kube, NS)
    account = kube.as_service_account("brook-system", "brook-operator")
    # A broker stuck in its shutdown is killed after 10 s rather than the template's 60 s (see
    # test_brokers_stop_cleanly_when_rolled); a clean stop takes well under a second here.
    runner = start_runner(kube, workdir, NS, max_grace_seconds=10)
    try:
        port = runner.reserve_port()
        operator_log = workdir / "operator.log"
        with operator_process(account, NS, operator_log, kube):
            b = Brook(kube, runner, f"127.0.0.1:{port}", workdir, operator_log)
            try:
                yield b
            finally:
                print(f"\noperator e2e facts: {b.facts}")
    finally:
        runner.stop(grace=5)
        kube.kubectl("delete", "namespace", NS, "--wait=false", check=False)
    pids = [int(e.detail.rsplit(" ", 1)[1]) for e in runner.events() if e.kind == "started"]
    assert not _alive(pids), f"processes left running: {_alive(pids)}"


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """When a scenario step fails: the operator's log and the latest pod logs (captured output)."""
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed == failed or "brook" not in request.fixturenames:
        return
    b: Brook = request.getfixturevalue("brook")
    print("\n--- operator.log\n" + tail(b.operator_log, 60))
    logs = sorted(b.workdir.glob("pods/*/*/logs/*.log"), key=lambda p: p.stat().st_mtime)
    for log in logs[-8:]:
        print(f"\n--- {log.relative_to(b.workdir)}\n" + tail(log, 15))


# ---------------------------------------------------------------- steps


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_cluster_runs_three_brokers_and_turns_ready(brook: Brook) -> None:
    started = time.monotonic()
    brook.kubectl("apply", "-f", "-", input=_cluster_manifest(int(brook.bootstrap.rsplit(":", 1)[1])))
    brook.kubectl("wait", "--for=condition=Ready", f"cluster/{CLUSTER}", "--timeout=90s", timeout=100)
    brook.facts["ready_after"] = time.monotonic() - started

    status = brook.cluster()["status"]
    assert status["registeredBrokers"] == [0, 1, 2]
    assert status["readyBrokers"] == 3
    assert status["bootstrapServers"] == f"{CLUSTER}-bootstrap.{NS}.svc:{brook.bootstrap.rsplit(':', 1)[1]}"
    sts = brook.get("statefulset", STS)
    assert sts["spec"]["replicas"] == 3 and sts["status"]["readyReplicas"] == 3
    etcd = brook.get("statefulset", f"{CLUSTER}-etcd")
    assert etcd["status"]["readyReplicas"] == 3  # the managed etcd runs as pods too
    # The real disruption controller acts on the readiness the pod runner reports. (EndpointSlices stay
    # empty: the API server refuses loopback endpoint addresses, and every pod here is 127.0.0.1.)
    brook.wait(
        lambda: (brook.get("pdb", STS).get("status") or {}).get("currentHealthy") == 3, 20, "the PDB's status"
    )

    # three real broker processes, one per pod, each on its own host port
    procs = [p for p in brook.runner.processes() if p.container == "broker"]
    assert sorted(p.pod for p in procs) == [f"{STS}-{i}" for i in range(3)]
    pods = brook.broker_pods()
    ports = {p["metadata"]["annotations"]["podrunner.brook.dev/port-kafka"] for p in pods}
    assert len(ports) == 3 and all(p["status"]["podIP"] == "127.0.0.1" for p in pods)
    # the rack init container (as the brokers' ServiceAccount, through the ClusterRoleBinding the operator
    # made) read the zone of the node the scheduler chose for each pod
    zones = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in brook.get("nodes")["items"]}
    want = {int(p["metadata"]["labels"][INDEX]): zones[p["spec"]["nodeName"]] for p in pods}
    admin = brook.admin()  # kept referenced until the future resolves
    md = admin.describe_cluster(request_timeout=10).result(15)
    assert {n.id: n.rack for n in md.nodes} == want
    assert {n.port for n in md.nodes} == {int(p) for p in ports}


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_topic_resource_creates_the_topic(brook: Brook) -> None:
    brook.kubectl("apply", "-f", "-", input=_topic("events", 3, 3))
    brook.kubectl("wait", "--for=condition=Ready", "topic/events", "--timeout=40s", timeout=50)
    topic = brook.topics()["events"]
    assert sorted(topic.partitions) == [0, 1, 2]
    assert all(len(p.replicas) == 3 and len(p.isrs) == 3 for p in topic.partitions.values())
    status = brook.get("topic", "events")["status"]
    assert status["partitions"] == 3 and status["replicationFactor"] == 3


class Acks:
    """A producer's delivery reports: acknowledged (partition, offset, value) and errors."""

    def __init__(self) -> None:
        self.ok: list[tuple[int, int, bytes]] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, err: Any, msg: Any) -> None:
        with self.lock:
            if err is None:
                self.ok.append((msg.partition(), msg.offset(), msg.value()))
            else:
                self.errors.append(str(err))


def _producer(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 120_000,
            "retry.backoff.ms": 100,
            "log_level": 3,
        }
    )


def _read_all(
    bootstrap: str, topic: str, partitions: int, timeout: float = 60
) -> dict[tuple[int, int], bytes]:
    """Every record of the topic (nobody writes any more), by (partition, offset)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"verify-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log_level": 3,
        }
    )
    got: dict[tuple[int, int], bytes] = {}
    done: set[int] = set()
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(done) < partitions and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            err, partition = msg.error(), msg.partition()
            assert partition is not None
            if err is None:
                got[(partition, msg.offset() or 0)] = msg.value() or b""
            elif err.code() == KafkaError._PARTITION_EOF:
                done.add(partition)
    finally:
        c.close()
    assert len(done) == partitions, f"read to the end of {sorted(done)} only"
    return got


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_real_client_produces_and_consumes(brook: Brook) -> None:
    from confluent_kafka import Consumer

    acks = Acks()
    p = _producer(brook.bootstrap)
    for i in range(300):
        p.produce("events", f"hello-{i:04d}".encode(), key=str(i).encode(), on_delivery=acks)
    assert p.flush(30) == 0
    assert not acks.errors and len(acks.ok) == 300
    c = Consumer(
        {
            "bootstrap.servers": brook.bootstrap,
            "group.id": "e2e-readers",
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
    )
    c.subscribe(["events"])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 40
    try:
        while len(seen) < 300 and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add(msg.value() or b"")
        c.commit(asynchronous=False)
    finally:
        c.close()
    assert seen == {f"hello-{i:04d}".encode() for i in range(300)}


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_kubectl_scale_adds_a_fourth_broker(brook: Brook) -> None:
    brook.kubectl("scale", f"cluster/{CLUSTER}", "--replicas=4")
    brook.wait(
        lambda: brook.get("statefulset", STS)["spec"]["replicas"] == 4, 30, "the StatefulSet to follow"
    )
    brook.wait(
        lambda: (brook.cluster().get("status") or {}).get("registeredBrokers") == [0, 1, 2, 3],
        60,
        "the 4th broker to register",
    )
    brook.kubectl("wait", "--for=condition=Ready", f"cluster/{CLUSTER}", "--timeout=30s", timeout=40)
    pods = brook.broker_pods()
    assert [p["metadata"]["name"] for p in pods] == [f"{STS}-{i}" for i in range(4)]
    assert all(_ready(p) for p in pods)
    assert brook.cluster()["status"]["replicas"] == 4


def _rolled(brook: Brook, before: dict[str, str]) -> bool:
    cluster = brook.cluster()
    if (cluster.get("status") or {}).get("observedGeneration") != cluster["metadata"]["generation"]:
        return False
    want = brook.get("statefulset", STS)["spec"]["template"]["metadata"]["annotations"][REVISION]
    pods = brook.broker_pods()
    return (
        len(pods) == 4
        and all(_ready(p) and p["metadata"]["annotations"].get(REVISION) == want for p in pods)
        and all(p["metadata"]["uid"] != before[p["metadata"]["name"]] for p in pods)
        and _condition(cluster, "Ready").get("status") == "True"
        and _condition(cluster, "Progressing").get("status") == "False"
    )


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_config_change_rolls_brokers_one_by_one_without_losing_acknowledged_records(brook: Brook) -> None:
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in brook.broker_pods()}
    controller = brook.cluster()["status"]["controllerId"]
    acks = Acks()
    stop = threading.Event()

    def produce() -> None:
        p = _producer(brook.bootstrap)
        i = 0
        while not stop.is_set():
            p.produce("events", f"roll-{i:06d}".encode(), key=str(i).encode(), on_delivery=acks)
            p.poll(0.005)
            i += 1
        p.flush(120)

    writer = threading.Thread(target=produce, name="roll-producer")
    writer.start()
    started = time.monotonic()
    try:
        brook.wait(lambda: len(acks.ok) > 200, 20, "records before the change")
        brook.kubectl(
            "patch",
            f"cluster/{CLUSTER}",
            "--type",
            "merge",
            "-p",
            '{"spec":{"config":{"retention.ms":3600000}}}',
        )
        outcome = _wait_for_roll(brook, before, started, timeout=170)
        brook.facts["roll_seconds"] = round(time.monotonic() - started, 1)
        n = len(acks.ok)
        brook.wait(lambda: len(acks.ok) > n + 200, 20, "production to go on after the roll")
    finally:
        stop.set()
        writer.join(150)
    assert not writer.is_alive()
    assert not acks.errors, acks.errors[:5]
    events = [e for e in brook.runner.events() if e.at >= started and e.pod.startswith(f"{STS}-")]
    brook.facts["roll_exits"] = {
        e.pod: e.detail
        for e in events
        if e.kind == "exited" and e.uid in before.values() and "broker" in e.detail
    }

    # every acknowledged record is there, at its acknowledged offset
    got = _read_all(brook.bootstrap, "events", 3)
    missing = [(p, o, v) for p, o, v in acks.ok if got.get((p, o)) != v]
    assert not missing, f"{len(missing)} of {len(acks.ok)} acknowledged records lost, e.g. {missing[:3]}"
    brook.facts["records_during_roll"] = len(acks.ok)

    assert outcome == "rolled", f"the roll stalled: {outcome}"

    # the new config reached the brokers (a topic default: the brokers' argv)
    pods = brook.broker_pods()
    assert all("retention.ms=3600000" in p["spec"]["containers"][0]["args"] for p in pods)

    # one at a time: each pod was deleted only after the previous replacement was ready; controller last
    order = _restart_order(events, set(before.values()))
    assert sorted(name for name, *_ in order) == sorted(before), order
    for (_, _, ready_at), (name, terminating_at, _) in itertools.pairwise(order):
        assert terminating_at >= ready_at, f"{name} went down before the previous broker was back: {order}"
    assert order[-1][0] == f"{STS}-{controller}", (order, controller)
    brook.facts["restart_order"] = [name for name, *_ in order]


STALL_SECONDS = 30


def _wait_for_roll(brook: Brook, before: dict[str, str], started: float, timeout: float) -> str:
    """ "rolled", or why the roll stalled: no progress for STALL_SECONDS after a broker had to be killed
    (the known broker bugs); any other stall or a timeout fails the test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _rolled(brook, before):
            return "rolled"
        events = [e for e in brook.runner.events() if e.at >= started and e.pod.startswith(f"{STS}-")]
        killed = [e.pod for e in events if e.kind == "killed"]
        progress = max(
            (e.at for e in events if e.kind in ("terminating", "ready", "deleted")), default=started
        )
        if killed and time.monotonic() - progress > STALL_SECONDS:
            cluster = brook.cluster()
            topics = brook.admin().list_topics(timeout=10).topics
            short = sorted(
                f"{t}-{p.id} replicas {p.replicas} isr {p.isrs}"
                for t, tm in topics.items()
                for p in tm.partitions.values()
                if len(p.isrs) < len(p.replicas)
            )
            return (
                f"killed: {killed}; Progressing: {_condition(cluster, 'Progressing').get('message')}; "
                f"under-replicated: {short}"
            )
        time.sleep(0.5)
    raise AssertionError(
        f"timed out after {timeout}s waiting for every broker to restart with the new config"
    )


@pytest.mark.slow
def test_brokers_stop_cleanly_when_rolled(brook: Brook) -> None:
    exits = brook.facts.get("roll_exits")
    # Depends on the rolling-restart test above having run to its end: its failure (or deselection)
    # must show here as a failure, not hide as a skip.
    assert exits is not None, "the roll did not run (see the rolling-restart test)"
    assert len(exits) == 4 and all(detail.startswith("broker code 0") for detail in exits.values()), exits


def _restart_order(events: list[Event], old_uids: set[str]) -> list[tuple[str, float, float]]:
    """(pod name, when the old pod began terminating, when its replacement became ready), by time."""
    out = []
    for e in events:
        if e.kind == "terminating" and e.uid in old_uids:
            ready = next(
                (x.at for x in events if x.kind == "ready" and x.pod == e.pod and x.uid not in old_uids), None
            )
            assert ready is not None, f"{e.pod}'s replacement never became ready"
            out.append((e.pod, e.at, ready))
    return sorted(out, key=lambda t: t[1])


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_deleting_the_topic_resource_deletes_the_topic(brook: Brook) -> None:
    brook.kubectl("delete", "topic", "events", "--timeout=40s", timeout=50)
    brook.wait(lambda: "events" not in brook.topics(), 20, "the topic to be deleted")
    assert "events" not in brook.kubectl("get", "topics", "-o", "name")


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_keep_annotation_keeps_the_topic(brook: Brook) -> None:
    brook.kubectl("apply", "-f", "-", input=_topic("kept", 2, 3, keep=True))
    brook.kubectl("wait", "--for=condition=Ready", "topic/kept", "--timeout=40s", timeout=50)
    assert sorted(brook.topics()["kept"].partitions) == [0, 1]
    # The operator's delete handler holds a finalizer: the resource is gone only after the handler
    # decided (and a wrong delete was sent), so no wait is needed once `kubectl delete` returned.
    assert brook.get("topic", "kept")["metadata"].get("finalizers"), "no finalizer to wait for"
    brook.kubectl("delete", "topic", "kept", "--timeout=40s", timeout=50)
    assert brook.kubectl("get", "topics", "-o", "name").strip() == ""
    assert "kept" in brook.topics()


@pytest.mark.slow
def test_the_operator_was_never_refused_by_rbac(brook: Brook) -> None:
    """It ran as system:serviceaccount:brook-system:brook-operator with manifests/rbac.yaml's rules: a 403
    shows in its log (kopf's requests) or in a Cluster condition (the operator's own, ReconcileFailed)."""
    log = brook.operator_log.read_text(errors="replace").splitlines()
    # A 403 as the API server's status (kopf logs "403, message='Forbidden'"), not a timestamp's ms.
    denied = [ln for ln in log if re.search(r"\b403[,:]| 403 |orbidden", ln)]
    denied += [c["message"] for c in brook.cluster()["status"]["conditions"] if "403" in c.get("message", "")]
    assert not denied, "\n".join(denied[:10])


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_deleting_the_cluster_collects_its_objects_and_keeps_the_claims(brook: Brook) -> None:
    """As operator/README.md says: the brokers' claims stay unless spec.storage.deleteClaim; the
    operator's finalizer removes the cluster-scoped rack binding; the real garbage collector the rest."""
    claims = {f"data-{STS}-{i}" for i in range(4)}
    assert claims <= set(
        brook.kubectl("get", "pvc", "-o", "name").replace("persistentvolumeclaim/", "").split()
    )
    brook.kubectl("delete", "cluster", CLUSTER, "--timeout=60s", timeout=70)
    selector = f"app.kubernetes.io/instance={CLUSTER}"

    def collected() -> bool:
        left = brook.kubectl(
            "get", "statefulsets,services,poddisruptionbudgets,pods", "-l", selector, "-o", "name"
        )
        return not left.strip()

    brook.wait(collected, 60, "the garbage collector to remove the Cluster's objects")
    brook.wait(lambda: not brook.runner.processes(), 30, "the pods' processes to stop")
    r = brook.kube.kubectl("get", "clusterrolebinding", f"brook-rack-{NS}-{CLUSTER}", check=False)
    assert r.returncode != 0 and "NotFound" in r.stderr, r.stderr
    left = set(brook.kubectl("get", "pvc", "-o", "name").replace("persistentvolumeclaim/", "").split())
    assert claims <= left, left
