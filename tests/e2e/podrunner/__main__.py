"""`python -m tests.e2e.podrunner --kubeconfig K --workdir DIR [--namespace NS]`: run the pod runner as
the node agent of a control plane (e.g. `python -m tests.e2e.controlplane --workdir D`) until
SIGINT/SIGTERM; the pods' processes are stopped on exit (their API objects are left alone)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from .runner import PodRunner, RunnerConfig


async def _main(config: RunnerConfig) -> None:
    runner = PodRunner(config)
    await runner.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.stop()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m tests.e2e.podrunner", description=__doc__)
    p.add_argument("--kubeconfig", type=Path, required=True)
    p.add_argument("--workdir", type=Path, required=True, help="pod logs, volumes, events.log")
    p.add_argument("--namespace", default=None, help="default: every namespace")
    p.add_argument("--max-probe-period", type=float, default=1.0, help="0: the probes' own periods")
    p.add_argument("--max-grace-seconds", type=float, default=None)
    p.add_argument("--log-level", default="INFO")
    a = p.parse_args()
    logging.basicConfig(level=a.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = RunnerConfig(
        kubeconfig=a.kubeconfig,
        workdir=a.workdir,
        namespace=a.namespace,
        max_probe_period=a.max_probe_period or None,
        max_grace_seconds=a.max_grace_seconds,
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(config))


if __name__ == "__main__":
    main()
