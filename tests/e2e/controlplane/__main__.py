"""A control plane from a shell, until Ctrl-C:

    python -m tests.e2e.controlplane --workdir /tmp/brook-cp [--node-agent NAMESPACE]

prints `export KUBECONFIG=...` (the admin's); with --node-agent the pod runner registers its nodes and
runs the pods of NAMESPACE as local processes."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from pathlib import Path

from .server import ControlPlane


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m tests.e2e.controlplane")
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--node-agent", metavar="NAMESPACE", help="run the pods of this namespace")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with ControlPlane(args.workdir.resolve()) as plane:
        runner = None
        if args.node_agent:
            from ..podrunner import RunnerConfig, RunnerThread

            config = RunnerConfig(
                kubeconfig=plane.admin_kubeconfig,
                workdir=args.workdir.resolve() / "node",
                namespace=args.node_agent,
            )
            runner = RunnerThread(config).start()
        started = plane.timings["start"]
        print(f"control plane at {plane.url} (started in {started} s); logs in {plane.workdir}")
        print(f"export KUBECONFIG={plane.admin_kubeconfig}", flush=True)
        stop.wait()
        if runner is not None:
            runner.stop()


if __name__ == "__main__":
    main()
