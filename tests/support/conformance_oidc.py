"""librdkafka's 0126 (SASL/OAUTHBEARER with OIDC) against a Brook that validates tokens with the JWKS of a
test identity provider, set up as trivup's harness sets up Kafka for it:

- the provider (tests/support/oidc.py) answers as trivup's OauthbearerOIDCApp: client credentials on
  /retrieve (client id 123, secret abc, scope test), an expired token, a malformed one, the JWT bearer
  grant with a client key whose files are in OAUTHBEARER_CLIENT_PRIVATE_KEY(_ENCRYPTED, _PASSWORD), Azure
  IMDS-style GETs, and its keys on /keys;
- the broker: a SASL_PLAINTEXT listener with OAUTHBEARER, `--sasl-oauthbearer-jwks-endpoint-url` on those
  keys and the expected audience `api://default` (trivup's broker config);
- the client: test.conf with sasl.oauthbearer.method=oidc and the provider's URLs, and VALID_OIDC_URL,
  INVALID_OIDC_URL, EXPIRED_TOKEN_OIDC_URL in the environment.

The sub-tests run one at a time (SUBTESTS): a failing sub-test would end the others.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from .cluster import Cluster
from .conformance_secure import run_test
from .oidc import IdentityProvider
from .ports import free_port

OIDC_TESTS = ("0126",)
SUBTESTS = (
    "Test producer and consumer with oidc configuration",  # client credentials, JWT bearer, IMDS, sub claim
    "Test share consumer with oidc configuration",  # KIP-932's share consumer over OIDC
    "Test OAUTHBEARER/OIDC failing with invalid JWT",
    "Test OAUTHBEARER/OIDC failing with expired JWT",
    "Test authentication failure with oidc configuration",
    "aws_iam",
)
KEY_PASSWORD = "brook-oidc"


def _client_keys(root: Path, idp: IdentityProvider) -> dict[str, str]:
    """trivup's client key for the JWT bearer grant: a plain and an encrypted PEM of one RSA key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    idp.client_key = key
    root.mkdir(parents=True, exist_ok=True)
    plain, encrypted = root / "client-key.pem", root / "client-key-encrypted.pem"
    fmt = serialization.PrivateFormat.PKCS8
    plain.write_bytes(key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()))
    protect = serialization.BestAvailableEncryption(KEY_PASSWORD.encode())
    encrypted.write_bytes(key.private_bytes(serialization.Encoding.PEM, fmt, protect))
    return {
        "OAUTHBEARER_CLIENT_PRIVATE_KEY": str(plain),
        "OAUTHBEARER_CLIENT_PRIVATE_KEY_ENCRYPTED": str(encrypted),
        "OAUTHBEARER_CLIENT_PRIVATE_KEY_PASSWORD": KEY_PASSWORD,
    }


def oidc_runner(kit: Path) -> Path:
    """The kit's test-runner built with libcurl, which librdkafka's OIDC client needs (the kit's own build
    has no libcurl, so its librdkafka refuses sasl.oauthbearer.method=oidc): libcurl's headers from apt,
    then the kit's build into a directory of its own (~5 min the first time)."""
    if subprocess.run(["dpkg", "-s", "libcurl4-openssl-dev"], capture_output=True).returncode != 0:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(
            [*sudo, "apt-get", "install", "-y", "-qq", "libcurl4-openssl-dev"], check=True, env=env
        )
    base = Path(os.environ.get("CONFORMANCE_DIR", Path.home() / ".cache" / "brook-conformance"))
    env = {**os.environ, "CONFORMANCE_DIR": f"{base}-oidc"}
    out = subprocess.run([str(kit / "build")], check=True, capture_output=True, text=True, env=env).stdout
    return Path(out.split()[-1])


def run_oidc(runner: Path, root: Path, timeout: int, logs: Path) -> dict[str, str]:
    with IdentityProvider() as idp:
        env = _client_keys(root / "keys", idp)
        retrieve = idp.base + "/retrieve"
        env |= {
            "VALID_OIDC_URL": retrieve,
            "INVALID_OIDC_URL": retrieve + "/badformat",
            "EXPIRED_TOKEN_OIDC_URL": retrieve + "/expire",
        }
        sasl_ports: list[int] = []

        def listeners(_node: int, port: int) -> list[str]:
            sasl_ports.append(free_port())
            return [
                "--listeners",
                f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_ports[-1]}",
            ]

        # 3 brokers: the test creates its topics with 3 replicas. Replication runs over PLAINTEXT.
        cluster = Cluster(
            root / "cluster",
            3,
            extra_args=[
                *("--auto-create-topics", "true", "--num-partitions", "4"),
                *("--sasl-enabled-mechanisms", "OAUTHBEARER"),
                *("--sasl-oauthbearer-jwks-endpoint-url", idp.base + "/keys"),
                *("--sasl-oauthbearer-expected-audience", "api://default"),
            ],
            port_args=listeners,
        ).start()
        conf = {
            "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in sasl_ports),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "123",
            "sasl.oauthbearer.client.secret": "abc",
            "sasl.oauthbearer.extensions": "ExtensionworkloadIdentity=develC348S,Extensioncluster=lkc123",
            "sasl.oauthbearer.scope": "test",
            "sasl.oauthbearer.token.endpoint.url": retrieve,
        }
        try:
            return {"0126": run_test(runner, "0126", conf, env, timeout, logs, SUBTESTS)}
        finally:
            cluster.stop()
