"""librdkafka's SSL and SASL tests (0097, 0135, 0142) against a Brook with SSL and SASL_SSL listeners.

The kit's `run` script writes a test.conf with bootstrap.servers only, and these tests read their
security settings from that file (security.protocol, ssl.*, sasl.*) and, for 0097, from the SSL_*
environment variables trivup sets (the same client certificate as PKCS#12, DER and PEM). So this runs
the kit's test-runner itself, exactly as `run` does, with a test.conf and environment of its own:

- a CA (trustme) that signs the broker's certificate (127.0.0.1) and the client's (CN=client, its PEM
  key encrypted with SSL_password, as trivup's), the broker requiring client certificates on its SSL
  listener (0097 expects an untrusted client certificate refused there, `SSL_client_auth=required`);
- a SCRAM-SHA-512 user made through AlterUserScramCredentials on the PLAINTEXT listener, used by 0135
  (which also tries a wrong password) and 0142 (with --connections-max-reauth-ms, which it reads back
  through DescribeConfigs).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .broker import BrokerProcess
from .cluster import Cluster
from .ports import free_port

# test id -> the listener (security.protocol) it runs over
SECURE_TESTS = {"0097": "SSL", "0135": "SASL_SSL", "0142": "SASL_SSL"}
# 0135's share-consumer part and every part of 0142 create topics with 3 replicas.
SECURE_BROKERS = {"0097": 1, "0135": 3, "0142": 3}
# librdkafka's SUBTESTS (one substring per run, matched in "<function>:<line>: <name>"): 0135's and
# 0142's sub-tests, the share-consumer ones (KIP-932) included, one at a time (the first failing
# sub-test would end the whole test). 0142's OAUTHBEARER variants need that mechanism: 0126's run.
SUBTESTS = {
    "0135": ("do_test:", "do_test_share_consumer:"),
    "0142": (
        "test consumer message loss",
        "test share consumer message loss",
        "test producer message loss",
        "test reauth in the middle of a txn",
        "test reauth failure with wrong credentials for reauth",
        "test share consumer reauth failure with wrong credentials",
    ),
}
# The share consumer's tests run only against a broker version with share groups (Kafka 4.2+).
KAFKA_VERSION = "4.2.0"
SSL_PASSWORD = "brook-conformance"
SCRAM_USER, SCRAM_PASSWORD = "conformance", "conformance-secret"
REAUTH_MS = 10_000  # 0142 runs ~17 intervals of it


@dataclass(frozen=True, slots=True)
class Secrets:
    dir: Path
    env: dict[str, str]  # the SSL_* variables of trivup
    ca: Path
    server: Path  # certificate chain and key, one PEM
    client_cert: Path
    client_key: Path  # encrypted with SSL_PASSWORD


def make_secrets(root: Path) -> Secrets:
    import trustme
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    root.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client", common_name="client")

    def write(name: str, data: bytes) -> Path:
        (root / name).write_bytes(data)
        return root / name

    ca_pem = write("ca.pem", ca.cert_pem.bytes())
    server_pem = write("server.pem", server.private_key_and_cert_chain_pem.bytes())
    cert = x509.load_pem_x509_certificate(client.cert_chain_pems[0].bytes())
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    password = SSL_PASSWORD.encode()
    enc = serialization.BestAvailableEncryption(password)
    pub_pem = write("client.pem", cert.public_bytes(serialization.Encoding.PEM))
    priv_pem = write(
        "client.key", key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)
    )
    env = {
        "SSL_password": SSL_PASSWORD,
        "SSL_client_auth": "required",
        "SSL_pkcs": str(
            write(
                "client.p12",
                pkcs12.serialize_key_and_certificates(b"client", key, cert, [ca_cert], enc),  # type: ignore[arg-type]
            )
        ),
        "SSL_pub_pem": str(pub_pem),
        "SSL_pub_der": str(write("client.der", cert.public_bytes(serialization.Encoding.DER))),
        "SSL_priv_pem": str(priv_pem),
        "SSL_priv_der": str(
            write(
                "client.key.der",
                key.private_bytes(
                    serialization.Encoding.DER,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                ),
            )
        ),
        "SSL_ca_pem": str(ca_pem),
        "SSL_ca_der": str(write("ca.der", ca_cert.public_bytes(serialization.Encoding.DER))),
        "SSL_all_cas_pem": str(ca_pem),
    }
    return Secrets(root, env, ca_pem, server_pem, pub_pem, priv_pem)


@dataclass(frozen=True, slots=True)
class SecureBroker:
    plaintext: str
    ssl: str
    sasl_ssl: str


@contextmanager
def secure_brook(root: Path, secrets: Secrets, base: list[str], brokers: int = 1) -> Iterator[SecureBroker]:
    """One broker, or etcd + N, each with PLAINTEXT (replication, set-up), SSL (client certificate
    required) and SASL_SSL listeners, and the conformance user's SCRAM-SHA-512 credential."""
    supers = f"User:ANONYMOUS;User:{SCRAM_USER};User:CN=client"
    security = [
        *base,
        *("--ssl-keystore-location", str(secrets.server)),
        *("--ssl-truststore-location", str(secrets.ca), "--ssl-client-auth-listeners", "SSL"),
        *("--sasl-enabled-mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"),
        *("--connections-max-reauth-ms", str(REAUTH_MS), "--super-users", supers),
    ]
    ports: list[dict[str, int]] = []

    def listeners(_node: int, port: int) -> list[str]:
        ps = {"PLAINTEXT": port, "SSL": free_port(), "SASL_SSL": free_port()}
        ports.append(ps)
        return ["--listeners", ",".join(f"{n}://127.0.0.1:{p}" for n, p in ps.items())]

    def addresses(name: str) -> str:
        return ",".join(f"127.0.0.1:{ps[name]}" for ps in ports)

    single: BrokerProcess | None = None
    cluster: Cluster | None = None
    if brokers == 1:
        port = free_port()
        single = BrokerProcess(root / "broker", port=port, args=[*security, *listeners(0, port)]).start()
    else:
        cluster = Cluster(root, brokers, extra_args=security, port_args=listeners).start()
    try:
        _add_scram_user(addresses("PLAINTEXT"))
        yield SecureBroker(addresses("PLAINTEXT"), addresses("SSL"), addresses("SASL_SSL"))
    finally:
        if single is not None:
            single.stop(timeout=30)
        if cluster is not None:
            cluster.stop()


def _add_scram_user(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    up = UserScramCredentialUpsertion(SCRAM_USER, info, SCRAM_PASSWORD.encode())
    for fut in admin.alter_user_scram_credentials([up]).values():
        fut.result(30)


def client_conf(test: str, broker: SecureBroker, secrets: Secrets) -> dict[str, str]:
    """The test.conf of one test: what trivup's harness writes for an SSL or SASL_SSL cluster."""
    ssl = {"ssl.ca.location": str(secrets.ca)}
    if SECURE_TESTS[test] == "SSL":
        return {
            "bootstrap.servers": broker.ssl,
            "security.protocol": "SSL",
            **ssl,
            "ssl.certificate.location": str(secrets.client_cert),
            "ssl.key.location": str(secrets.client_key),
            "ssl.key.password": SSL_PASSWORD,
        }
    return {
        "bootstrap.servers": broker.sasl_ssl,
        "security.protocol": "SASL_SSL",
        **ssl,
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": SCRAM_USER,
        "sasl.password": SCRAM_PASSWORD,
    }


_PASSED = r"^\| +{t}_[A-Za-z0-9_]+ +\| +PASSED"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_test(
    runner: Path,
    test: str,
    conf: dict[str, str],
    env: dict[str, str],
    timeout: int,
    logs: Path,
    subtests: tuple[str, ...] | None = None,
) -> str:
    """A test, or each of its sub-tests (`subtests`, else SUBTESTS) in turn; PASS only when every one did."""
    subs = SUBTESTS.get(test, ()) if subtests is None else subtests
    if not subs:
        return _run_one(runner, test, conf, env, timeout, logs, None)
    statuses = [_run_one(runner, test, conf, env, timeout, logs, sub) for sub in subs]
    return next((s for s in statuses if s != "PASS"), "PASS")


def _run_one(
    runner: Path,
    test: str,
    conf: dict[str, str],
    env: dict[str, str],
    timeout: int,
    logs: Path,
    subtest: str | None,
) -> str:
    """One test the way the kit's `run` runs it (test-runner -p1 -L in its directory, Kafka 4.2, the
    default scenario, a time limit); prints its RESULT line, returns the status."""
    logs.mkdir(parents=True, exist_ok=True)
    conf_file = logs / f"{test}.conf"
    conf_file.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    full_env = {
        **os.environ,
        **env,
        "RDKAFKA_TEST_CONF": str(conf_file),
        "TEST_KAFKA_VERSION": os.environ.get("TEST_KAFKA_VERSION", KAFKA_VERSION),
        "TESTS": test,
        "TEST_SCENARIO": "default",
        "LD_LIBRARY_PATH": "../src:../src-cpp",
    }
    if subtest is not None:
        full_env["SUBTESTS"] = subtest
    log = logs / (f"{test}-{re.sub(r'[^A-Za-z0-9_.-]', '_', subtest)}.log" if subtest else f"{test}.log")
    try:
        with open(log, "w") as out:
            rc = subprocess.run(
                ["./test-runner", "-p1", "-L"],
                cwd=runner.parent,
                env=full_env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            ).returncode
    except subprocess.TimeoutExpired:
        rc = 124
    text = _ANSI.sub("", log.read_text(errors="replace"))
    passed = re.search(_PASSED.format(t=test), text, re.MULTILINE) is not None
    failed_at = re.search(r"### Test .* failed at.*\n(.*)", text)
    reason = " ".join(failed_at.group(1).split())[:200] if failed_at else ""
    if rc == 124:
        status = "TIMEOUT"
    elif rc != 0:
        status = "FAIL"
    elif passed:
        status = "PASS"
    else:
        status = "SKIP"
        skipped = re.search(r"^.*SKIPPING TEST.*$", text, re.MULTILINE)
        reason = skipped.group(0)[:200] if skipped else ""
    name = f"{test} [{subtest}]" if subtest else test
    line = f"RESULT {name} {status} | {reason} (log {log})"
    print(line, flush=True)
    return status
