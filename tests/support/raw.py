"""A raw-socket Kafka client: requests encoded by kafka-python, independent of Brook's codec."""

from __future__ import annotations

import select
import socket
import ssl
import struct
from typing import Any

from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest

from brook.protocol.messages import response_class


def readable(sock: socket.socket, seconds: float) -> bool:
    """Whether `sock` has data (or EOF) within `seconds`. poll(), not select(): a long test session holds
    more than 1,024 descriptors, past which select() refuses a socket."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(seconds * 1000))


def api_versions_request() -> Any:
    """ApiVersions v3+ names the client (KIP-511): an empty name is INVALID_REQUEST, as Kafka answers."""
    return ApiVersionsRequest(client_software_name="brook-tests", client_software_version="1")


class RawClient:
    def __init__(
        self,
        bootstrap: str = "",
        timeout: float = 10.0,
        client_id: str = "raw-test",
        sock: socket.socket | ssl.SSLSocket | None = None,
    ) -> None:
        """Connects to `bootstrap`, or speaks over `sock`, a connection the caller made (e.g. TLS)."""
        if sock is None:
            host, port = bootstrap.rsplit(":", 1)
            sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock = sock
        self._cid = 0
        self.client_id = client_id

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def served(self) -> bool:
        """Whether the broker answers an ApiVersions request on this connection (False: it closed it)."""
        try:
            return bool(self.request(api_versions_request(), 3).api_keys)
        except (ConnectionError, ssl.SSLError):
            return False

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exact(4))[0]
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            out += chunk
        return bytes(out)

    def is_closed(self, wait: float = 3.0) -> bool:
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def request(self, req: Any, version: int) -> Any:
        """Send a kafka-python request object at `version`; decode the response with kafka-python."""
        self._cid += 1
        req.with_header(correlation_id=self._cid, client_id=self.client_id)
        self.send_frame(req.encode(version=version, header=True))
        frame = self.read_frame()
        cls = response_class(req.API_KEY)  # kafka-python's generated class, not Brook's codec
        flexible = cls.flexible_version_q(version) and req.API_KEY != 18  # ApiVersions: v0 header
        cid = struct.unpack_from(">i", frame)[0]
        assert cid == self._cid, (cid, self._cid)
        body = frame[5:] if flexible else frame[4:]
        return cls.decode(body, version=version)


def fetch_request(
    topic: str,
    offset: int = 0,
    *,
    partition: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    replica_id: int = -1,
    max_bytes: int = 1 << 20,
) -> Any:
    """A kafka-python FetchRequest (v4-v12 fields, sessionless) for one partition of one topic."""
    F = FetchRequest
    return F(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            F.FetchTopic(
                topic=topic,
                partitions=[
                    F.FetchTopic.FetchPartition(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=max_bytes,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
