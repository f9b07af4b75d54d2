"""`brook-operator`: `run` (the operator: leader election, then kopf) `rack-init` and `advertise`
(init containers)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from . import resources
from .cluster import DEFAULT_BOOTSTRAP_TEMPLATE, OperatorSettings

log = logging.getLogger("brook_operator")

DEFAULT_IMAGE = "ghcr.io/brook-dev/brook:0.1.0"


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"BROOK_OPERATOR_{name}", default)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="brook-operator", description="Brook's Kubernetes operator")
    p.add_argument("--log-level", default=_env("LOG_LEVEL", "INFO"))
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run the operator (flags, or BROOK_OPERATOR_* environment variables)")
    r.add_argument(
        "--namespace",
        action="append",
        default=[n for n in (_env("WATCH_NAMESPACES") or "").split(",") if n],
        help="watch only this namespace (repeatable); default: all namespaces",
    )
    r.add_argument(
        "--leader-election",
        choices=("true", "false"),
        default=_env("LEADER_ELECTION", "true"),
        help="hold a coordination.k8s.io Lease so only one replica reconciles",
    )
    r.add_argument("--lease-name", default=_env("LEASE_NAME", "brook-operator"))
    r.add_argument("--lease-namespace", default=_env("NAMESPACE"), help="default: BROOK_OPERATOR_NAMESPACE")
    r.add_argument("--lease-seconds", type=int, default=int(_env("LEASE_SECONDS", "15") or 15))
    r.add_argument("--identity", default=_env("POD_NAME") or socket.gethostname())
    r.add_argument("--health-port", type=int, default=int(_env("HEALTH_PORT", "8080") or 8080))
    r.add_argument("--default-image", default=os.environ.get("BROOK_DEFAULT_IMAGE", DEFAULT_IMAGE))
    r.add_argument(
        "--rack-cluster-role", default=_env("RACK_CLUSTER_ROLE", resources.DEFAULT_RACK_CLUSTER_ROLE)
    )
    r.add_argument(
        "--bootstrap-template",
        default=_env("BOOTSTRAP_TEMPLATE", DEFAULT_BOOTSTRAP_TEMPLATE),
        help="how the operator reaches a cluster over Kafka; {name} {namespace} {port}",
    )
    r.add_argument(
        "--tls-verify-hostname",
        choices=("true", "false"),
        default=_env("TLS_VERIFY_HOSTNAME", "true"),
        help="check brokers' certificates against the bootstrap name (false: tests outside Kubernetes)",
    )
    r.add_argument("--kafka-timeout", type=float, default=float(_env("KAFKA_TIMEOUT", "10") or 10))

    k = sub.add_parser("rack-init", help="write the node's rack (a topology label) to a file")
    k.add_argument("--node", required=True)
    k.add_argument("--topology-key", required=True)
    k.add_argument("--output", type=Path, required=True)

    a = sub.add_parser("advertise", help="write this broker's advertised listeners to a file")
    a.add_argument("--pod", required=True)
    a.add_argument(
        "--table",
        default=os.environ.get("BROOK_ADVERTISED_TABLE", ""),
        help="default: $BROOK_ADVERTISED_TABLE",
    )
    a.add_argument("--output", type=Path, required=True)
    a.add_argument("--node", default=None)
    return p


async def _health_server(port: int) -> web.AppRunner | None:
    """/healthz answers while the event loop runs (standbys included)."""
    if port <= 0:
        return None

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/healthz", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()
    return runner


async def run(args: argparse.Namespace) -> int:
    import kopf

    from . import handlers  # registers the handlers
    from .handlers.runtime import Runtime
    from .kafka_admin import AdminPool
    from .kube import Kube
    from .leader import LeaderElector

    del handlers
    settings = OperatorSettings(
        default_image=args.default_image,
        rack_cluster_role=args.rack_cluster_role,
        bootstrap_template=args.bootstrap_template,
        verify_hostname=args.tls_verify_hostname == "true",
    )
    kube = Kube.from_environment()
    runtime = Runtime(kube=kube, admins=AdminPool(args.kafka_timeout), settings=settings)
    health = await _health_server(args.health_port)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    elector: LeaderElector | None = None
    lost = asyncio.Event()
    exit_code = 0
    try:
        if args.leader_election == "true":
            if not args.lease_namespace:
                log.error("leader election needs --lease-namespace (or BROOK_OPERATOR_NAMESPACE)")
                return 2
            elector = LeaderElector(
                kube,
                namespace=args.lease_namespace,
                name=args.lease_name,
                identity=args.identity,
                lease_seconds=args.lease_seconds,
                renew_seconds=max(1.0, args.lease_seconds / 3),
            )
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            acquire = asyncio.create_task(elector.acquire())
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({acquire, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not acquire.done():
                acquire.cancel()
                return 0
            stopping.cancel()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)  # kopf installs its own
        holder = asyncio.create_task(elector.hold(lost)) if elector is not None else None
        await kopf.operator(
            clusterwide=not args.namespace,
            namespaces=args.namespace,
            standalone=True,
            memo=runtime,
            stop_flag=lost,
        )
        if holder is not None:
            holder.cancel()
        if lost.is_set():
            log.error("leadership lost: exiting so a standby takes over")
            exit_code = 1
    finally:
        if elector is not None and not lost.is_set():
            await elector.release()
        await kube.close()
        if health is not None:
            await health.cleanup()
    return exit_code


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=str(args.log_level).upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.command == "rack-init":
        from .rackinit import rack_init

        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(rack_init(args.node, args.topology_key, args.output))
        return
    if args.command == "advertise":
        from .rackinit import advertise

        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(advertise(args.pod, args.table, args.output, args.node))
        return
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
