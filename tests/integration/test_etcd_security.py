"""Brook against an etcd that requires TLS client certificates and has authentication enabled (a real
etcd started with --cert-file/--key-file/--trusted-ca-file/--client-cert-auth, users made with
etcdctl): the metadata client, a 3-broker cluster, and the one-line start-up errors."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from brook.metadata import EtcdAuth, EtcdAuthError, EtcdClient
from brook.metadata.watch import watch_prefix
from tests.integration.test_cluster import Acks, consume_all, create
from tests.support.cluster import Cluster
from tests.support.etcd import SecureEtcd, run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureEtcd]:
    e = SecureEtcd(tmp_path_factory.mktemp("secure-etcd"), auth=True).start()
    try:
        yield e
    finally:
        e.stop()


def _auth(e: SecureEtcd, **overrides: object) -> EtcdAuth:
    fields: dict[str, object] = {
        "cacert": e.ca,
        "cert": e.client_cert,
        "key": e.client_key,
        "user": e.user,
        "password": e.password,
    }
    fields.update(overrides)
    return EtcdAuth(**fields)  # type: ignore[arg-type]


def test_client_with_certificate_and_password_reads_writes_watches_and_survives_restart(
    etcd: SecureEtcd,
) -> None:
    async def scenario() -> None:
        async with EtcdClient(etcd.process.endpoint, auth=_auth(etcd), retry_for=20) as c:
            lease = await c.grant_lease(5)
            await c.put(b"/brook/t/a", b"1", lease=lease.id)
            kv = await c.get(b"/brook/t/a")
            assert kv is not None and kv.value == b"1"
            watch = watch_prefix(c, b"/brook/t/", kv.mod_revision + 1)
            await c.put(b"/brook/t/b", b"2")
            event = await anext(watch)
            assert (event.key, event.value) == (b"/brook/t/b", b"2")
            await watch.aclose()
            # etcd keeps its auth tokens in memory: after a restart the old token is refused and
            # the client must authenticate again by itself.
            etcd.process.restart()
            kv = await c.get(b"/brook/t/b")
            assert kv is not None and kv.value == b"2"
            assert await c.refresh_lease(lease.id, retry=True) > 0
            # The user may only touch Brook's keys.
            with pytest.raises(EtcdAuthError, match="permission denied"):
                await c.put(b"/elsewhere", b"x")

    run(scenario(), timeout=90)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"password": "wrong"}, "etcd refused the user or password"),
        ({"user": None, "password": None}, "permission denied"),  # the certificate's CN: no role
        ({"cacert": "other"}, "TLS handshake with etcd failed: CERTIFICATE_VERIFY_FAILED"),
        ({"cert": None, "key": None}, "TLS handshake with etcd failed"),  # no client certificate
    ],
)
def test_client_refused_at_once_with_the_reason(
    etcd: SecureEtcd, overrides: dict[str, object], message: str
) -> None:
    if overrides.get("cacert") == "other":
        overrides = {**overrides, "cacert": etcd.other_ca}

    async def scenario() -> None:
        # retry_for is long: a refusal must not wait for it (it is not "etcd unavailable").
        async with EtcdClient(etcd.process.endpoint, auth=_auth(etcd, **overrides), retry_for=60) as c:
            with pytest.raises(EtcdAuthError, match=message):
                await c.connect()

    run(scenario(), timeout=30)


def _broker(tmp: Path, etcd: SecureEtcd, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "brook.cli", "broker", "--port", "0", "--metrics-port", "-1",
            "--data-dir", str(tmp / "data"), "--etcd-endpoints", etcd.process.endpoint, *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("case", "fragment"),
    [
        ("wrong-password", "cannot start: etcd refused the user or password"),
        ("wrong-ca", "cannot start: the TLS handshake with etcd failed: CERTIFICATE_VERIFY_FAILED"),
        ("no-password", "--etcd-user needs BROOK_ETCD_PASSWORD or --etcd-password-file"),
        ("missing-key", "--etcd-cert and --etcd-key go together"),
    ],
)
def test_broker_start_up_error_is_one_line(
    tmp_path: Path, etcd: SecureEtcd, case: str, fragment: str
) -> None:
    args = etcd.broker_args()
    if case == "wrong-password":
        args = [*etcd.broker_args(user=False), "--etcd-user", etcd.user]
        args += ["--etcd-password-file", str(etcd.password_file("wrong"))]
    elif case == "wrong-ca":
        args = etcd.broker_args(ca=etcd.other_ca)
    elif case == "no-password":
        args = [*etcd.broker_args(user=False), "--etcd-user", etcd.user]
    elif case == "missing-key":
        args = ["--etcd-cacert", str(etcd.ca), "--etcd-cert", str(etcd.client_cert)]
    out = _broker(tmp_path, etcd, *args)
    assert out.returncode == 2, out.stderr
    lines = [line for line in out.stderr.splitlines() if not line[:4].isdigit()]  # log lines have a date
    assert lines == [lines[0]] and fragment in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_three_brokers_on_a_tls_etcd_with_auth_produce_and_consume(tmp_path: Path) -> None:
    etcd = SecureEtcd(tmp_path / "etcd", auth=True).start()
    cluster = Cluster(tmp_path, 3, extra_args=etcd.broker_args(), etcd=etcd.process).start()
    try:
        create(cluster, "secured", 3, 3)
        acks = Acks()
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(300):
            p.produce("secured", f"v{i}".encode(), callback=acks)
        assert p.flush(60) == 0
        assert not acks.errors and len(acks.ok) == 300
        got = consume_all(cluster, "secured", 3, 300)
        assert sorted(v for _, _, v in got) == sorted(f"v{i}".encode() for i in range(300))
        # The brokers' keys are there, under the user's prefix.
        assert "/brook/default/" in etcd.ctl("get", "--prefix", "--keys-only", "/brook/")
    finally:
        cluster.stop()
