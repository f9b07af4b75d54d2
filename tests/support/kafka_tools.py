"""Stand-ins for Kafka's `bin/kafka-topics.sh` and `bin/kafka-acls.sh` that run the `brook` CLI, so that
librdkafka's tests that shell out to them (0052, 0077, 0109, 0115, 0119: they create topics with configs
and add ACLs that way) run against Brook. Only the flags those tests pass are understood.

    python -m tests.support.kafka_tools install DIR   # writes DIR/bin/kafka-{topics,acls}.sh; KAFKA_PATH=DIR
    python -m tests.support.kafka_tools topics --bootstrap-server B --create --topic T ...
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _brook(bootstrap: str, *args: str) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "services"), str(REPO)])}
    cmd = [sys.executable, "-m", "brook.cli", *args, "--bootstrap", bootstrap]
    print("+ brook " + shlex.join(cmd[3:]), file=sys.stderr, flush=True)
    return subprocess.run(cmd, env=env).returncode


def topics(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kafka-topics.sh")
    p.add_argument("--bootstrap-server", required=True)
    action = p.add_mutually_exclusive_group(required=True)
    for flag in ("--create", "--delete", "--list", "--alter"):
        action.add_argument(flag, action="store_true")
    p.add_argument("--topic")
    p.add_argument("--partitions", default="1")
    p.add_argument("--replication-factor", default="1")
    p.add_argument("--config", action="append", default=[])
    p.add_argument("--if-not-exists", action="store_true")
    a = p.parse_args(argv)
    if a.list:
        return _brook(a.bootstrap_server, "topic", "list")
    if not a.topic:
        p.error("--topic is required")
    if a.delete:
        return _brook(a.bootstrap_server, "topic", "delete", a.topic)
    if a.alter:
        return _brook(a.bootstrap_server, "topic", "add-partitions", a.topic, "--total", a.partitions)
    configs = [arg for c in a.config for arg in ("--config", c)]
    return _brook(
        a.bootstrap_server,
        *("topic", "create", a.topic, "--partitions", a.partitions, "--replicas", a.replication_factor),
        *configs,
    )


def acls(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kafka-acls.sh")
    p.add_argument("--bootstrap-server", required=True)
    action = p.add_mutually_exclusive_group(required=True)
    for flag in ("--add", "--remove", "--list"):
        action.add_argument(flag, action="store_true")
    p.add_argument("--force", action="store_true")
    for flag in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host", "--operation"):
        p.add_argument(flag, action="append", default=[])
    for flag in ("--topic", "--group", "--transactional-id"):
        p.add_argument(flag, action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", default=None)
    a = p.parse_args(argv)
    resources = [*(f"--topic={t}" for t in a.topic), *(f"--group={g}" for g in a.group)]
    resources += [f"--transactional-id={t}" for t in a.transactional_id]
    resources += ["--cluster"] if a.cluster else []
    ops = [f"--operation={o}" for o in a.operation]
    hosts = [f"--host={h}" for h in [*a.allow_host, *a.deny_host]]
    pattern = [f"--pattern-type={a.resource_pattern_type}"] if a.resource_pattern_type else []
    if a.add:
        principals = [f"--allow={x}" for x in a.allow_principal] + [f"--deny={x}" for x in a.deny_principal]
        return _brook(a.bootstrap_server, "acl", "add", *principals, *ops, *hosts, *resources, *pattern)
    if a.list:
        return _brook(a.bootstrap_server, "acl", "list", *resources, *pattern)
    status = 0
    for principal, permission in [(x, "allow") for x in a.allow_principal] + [
        (x, "deny") for x in a.deny_principal
    ] or [(None, "any")]:
        who = [f"--principal={principal}"] if principal else []
        status |= _brook(
            a.bootstrap_server,
            *("acl", "remove", *who, f"--permission={permission}", *ops, *hosts, *resources, *pattern),
        )
    return status


def install(root: Path) -> Path:
    """Writes ROOT/bin/kafka-topics.sh and kafka-acls.sh (this interpreter, this checkout); returns ROOT
    (librdkafka's tests run $KAFKA_PATH/bin/<tool>)."""
    (root / "bin").mkdir(parents=True, exist_ok=True)
    for tool in ("topics", "acls"):
        script = root / "bin" / f"kafka-{tool}.sh"
        script.write_text(
            "#!/bin/sh\n"
            f"cd {shlex.quote(str(REPO))} && exec {shlex.quote(sys.executable)} "
            f'-m tests.support.kafka_tools {tool} "$@"\n'
        )
        script.chmod(0o755)
    return root


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("topics", "acls", "install"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "install":
        print(install(Path(argv[1])))
        return 0
    return topics(argv[1:]) if argv[0] == "topics" else acls(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
