"""A loopback TCP proxy that can hold back what the server sends by a fixed delay (order kept).

Put between one broker and etcd, it makes that broker's view of the cluster lag: its own metadata
writes land at once, but it learns of them (and of everyone else's) `delay_s` later. That is how a
test opens, on purpose, the window a loaded machine opens by chance.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import deque

from .ports import free_port


class DelayProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.delay_s = 0.0
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self.upstream)
            except OSError:
                return
            self._sockets += [client, server]
            threading.Thread(target=self._pipe, args=(client, server), daemon=True).start()
            threading.Thread(target=self._delayed_pipe, args=(server, client), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        self._shut(dst)

    def _delayed_pipe(self, src: socket.socket, dst: socket.socket) -> None:
        """Each chunk goes out `delay_s` (as it was when the chunk arrived) after it arrived."""
        queue: deque[tuple[float, bytes]] = deque()
        ready = threading.Condition()
        done = threading.Event()

        def send() -> None:
            with contextlib.suppress(OSError):
                while True:
                    with ready:
                        while not queue and not done.is_set():
                            ready.wait()
                        if not queue:
                            break
                        due, data = queue.popleft()
                    time.sleep(max(0.0, due - time.monotonic()))
                    dst.sendall(data)
            self._shut(dst)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        last_due = 0.0
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                last_due = max(last_due, time.monotonic() + self.delay_s)  # never reorder
                with ready:
                    queue.append((last_due, data))
                    ready.notify()
        done.set()
        with ready:
            ready.notify()

    @staticmethod
    def _shut(s: socket.socket) -> None:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_WR)
