"""What asyncio's TLS transport costs the sender, against the alternatives (figures printed, not a test).

    .venv/bin/python bench/tls_transport_bench.py [--mb 300] [--repeats 3]

A server process sends --mb MiB of random bytes in 1 MiB writes to one TLS client (a separate Python
process reading with a blocking ssl socket), three ways:
- asyncio: `asyncio.start_server(ssl=...)`, writer.write + drain (asyncio.sslproto: SSLObject over
  memory BIOs, what Brook's TLS listeners use);
- sslsocket: a non-blocking `ssl.SSLSocket` driven by the event loop (OpenSSL writes the records to the
  socket itself: no memory-BIO copies);
- uvloop: uvloop's TLS transport (Cython) with the same start_server code.
It prints the server's CPU-seconds (getrusage) per GB sent: the whole TLS send path (encryption,
copies, syscalls), with the same certificate and OpenSSL's default TLS 1.3 cipher for all three.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import ssl
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trustme

CHUNK = 1 << 20
CLIENT = r"""
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[3])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1]))), server_hostname="127.0.0.1")
buf, got, want = bytearray(1 << 20), 0, int(sys.argv[2])
while got < want:
    n = s.recv_into(buf)
    if not n:
        break
    got += n
s.sendall(b"x")
"""


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Bench:
    def __init__(self, directory: Path, mb: int) -> None:
        ca = trustme.CA()
        self.ca = directory / "ca.pem"
        self.cert = directory / "server.pem"
        ca.cert_pem.write_to_path(str(self.ca))
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(self.cert))
        self.mb = mb
        self.payload = os.urandom(CHUNK)

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(self.cert))
        return ctx

    async def _client(self, port: int) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-c", CLIENT, str(port), str(self.mb * CHUNK), str(self.ca)
        )

    async def via_start_server(self) -> float:
        done: asyncio.Future[float] = asyncio.get_running_loop().create_future()

        async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            c0 = cpu_seconds()
            for _ in range(self.mb):
                w.write(self.payload)
                await w.drain()
            await r.read(1)
            done.set_result(cpu_seconds() - c0)
            w.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=self.server_context())
        client = await self._client(server.sockets[0].getsockname()[1])
        used = await done
        await client.wait()
        server.close()
        return used

    async def via_sslsocket(self) -> float:
        loop = asyncio.get_running_loop()
        listener = socket.create_server(("127.0.0.1", 0))
        listener.setblocking(False)
        client = await self._client(listener.getsockname()[1])
        raw, _ = await loop.sock_accept(listener)
        s = self.server_context().wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        s.setblocking(False)

        async def ready(add: Callable[..., None], remove: Callable[[int], object]) -> None:
            f: asyncio.Future[None] = loop.create_future()
            add(s.fileno(), f.set_result, None)
            try:
                await f
            finally:
                remove(s.fileno())

        async def retry(op: Callable[[], object]) -> None:
            while True:
                try:
                    op()
                    return
                except ssl.SSLWantReadError:
                    await ready(loop.add_reader, loop.remove_reader)
                except ssl.SSLWantWriteError:
                    await ready(loop.add_writer, loop.remove_writer)

        await retry(s.do_handshake)
        c0 = cpu_seconds()
        view = memoryview(self.payload)
        for _ in range(self.mb):
            await retry(lambda: s.send(view))
        await retry(lambda: s.recv(1))
        used = cpu_seconds() - c0
        await client.wait()
        s.close()
        listener.close()
        return used


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="brook-tlsbench-") as d:
        b = Bench(Path(d), a.mb)
        runs: list[tuple[str, Callable[[], Awaitable[float]], Callable[..., float]]] = [
            ("asyncio sslproto", b.via_start_server, asyncio.run),
            ("ssl.SSLSocket", b.via_sslsocket, asyncio.run),
        ]
        try:
            import uvloop

            runs.append(("uvloop", b.via_start_server, uvloop.run))
        except ImportError:
            print("uvloop not installed: its row is skipped")
        print(f"{time.strftime('%Y-%m-%d %H:%M')} {os.cpu_count()} cores, OpenSSL {ssl.OPENSSL_VERSION}, "
              f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
        for name, fn, run in runs:
            per_gb = sorted(run(fn()) / (a.mb * CHUNK / 1e9) for _ in range(a.repeats))
            print(f"{name:18} best {per_gb[0]:.2f}  median {per_gb[len(per_gb) // 2]:.2f} CPU-s/GB sent")
        print(f"load at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
