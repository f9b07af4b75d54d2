"""Start-up errors of `brook broker` are one line naming the flag or variable, with exit status 2,
never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def broker(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "brook.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("args", "env", "fragment"),
    [
        (["broker", "--port", "70000"], {}, "--port 70000: must be an integer from 0 to 65535"),
        (["broker"], {"BROOK_PORT": "abc"}, "BROOK_PORT='abc' is not valid for --port"),
        (["--log-level", "LOUD", "broker"], {}, "--log-level LOUD"),
        (
            ["broker"],
            {"BROOK_EVENT_LOOP": "fast"},
            "BROOK_EVENT_LOOP='fast' is not valid for --event-loop: must be one of asyncio, uvloop",
        ),
        (
            ["broker", "--topic-default", "retention.ms=abc"],
            {},
            "--topic-default retention.ms=abc: retention.ms must be an integer from -1 to 922337203685477",
        ),
        (
            ["broker", "--topic-default", "segment.bytes=99999999999"],
            {},
            "segment.bytes must be an integer from 14 to 2147483647, got 99999999999",
        ),
        (
            ["broker", "--topic-default", "cleanup.policy=forever"],
            {},
            "--topic-default cleanup.policy=forever: cleanup.policy must be delete, compact",
        ),
        (
            ["broker", "--topic-default", "nope=1"],
            {},
            "--topic-default nope=1: unknown topic config 'nope'; known: cleanup.policy, retention.ms",
        ),
        (
            ["broker"],
            {"BROOK_TOPIC_DEFAULT": "retention.ms=60000 flush.ms=soon"},
            "flush.ms must be an integer from 0 to",
        ),
        (["broker", "--listeners", "FOO://127.0.0.1:0"], {}, "FOO"),
        (
            [
                "broker",
                "--inter-broker-sasl-username",
                "b",
                "--sasl-mechanism-inter-broker-protocol",
                "OAUTHBEARER",
            ],
            {"BROOK_INTER_BROKER_SASL_PASSWORD": "pw"},
            "brokers log in to each other with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
        ),
        (
            ["broker", "--inter-broker-sasl-username", "b", "--sasl-enabled-mechanisms", "SCRAM-SHA-512"],
            {"BROOK_INTER_BROKER_SASL_PASSWORD": "pw"},
            "PLAIN is not in --sasl-enabled-mechanisms",
        ),
        (
            ["broker", "--sasl-enabled-mechanisms", "OAUTHBEARER"],
            {},
            "OAUTHBEARER needs --sasl-oauthbearer-jwks-endpoint-url",
        ),
    ],
)
def test_bad_flags_and_variables(tmp_path: Path, args: list[str], env: dict[str, str], fragment: str) -> None:
    r = broker(*args, "--data-dir", str(tmp_path / "d"), env=env)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert fragment in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_data_dir_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("")
    r = broker("broker", "--port", "0", "--data-dir", str(f))
    assert r.returncode == 2 and "is a file" in r.stderr and "Traceback" not in r.stderr


def test_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = broker("broker", "--port", str(port), "--metrics-port", "-1", "--data-dir", str(tmp_path / "d"))
    assert r.returncode == 2 and "already in use" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_an_unreachable_etcd_is_one_line(tmp_path: Path) -> None:
    """etcd refusing connections for the client's whole retry window (10 s): one line naming the flag."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    r = broker(
        "broker", "--etcd-endpoints", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "d"),
        "--port", "0", "--metrics-port", "-1",
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert f"cannot start: etcd at 127.0.0.1:{port} is unavailable" in r.stderr
    assert r.stderr.strip().endswith("(check --etcd-endpoints / BROOK_ETCD_ENDPOINTS)")
