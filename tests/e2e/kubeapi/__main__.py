"""`python -m tests.e2e.kubeapi --port 8080 [--kubeconfig PATH]`: run the emulator in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from .runner import write_kubeconfig
from .server import KubeApiServer


async def _main(args: argparse.Namespace) -> None:
    server = KubeApiServer(args.host, args.port, bookmark_interval=args.bookmark_interval)
    await server.start()
    if args.kubeconfig:
        write_kubeconfig(Path(args.kubeconfig), server.url)
    print(f"kubeapi emulator listening on {server.url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m tests.e2e.kubeapi", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on stdout)")
    p.add_argument("--kubeconfig", help="write a kubeconfig pointing to the emulator here")
    p.add_argument("--bookmark-interval", type=float, default=5.0)
    p.add_argument("--log-level", default="WARNING")
    args = p.parse_args()
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
