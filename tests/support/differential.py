"""Differential conformance: the same requests to Apache Kafka and to Brook, the answers compared field by
field. Requests are plain dicts encoded by kafka-python's classes generated from Kafka's JSON specs
(brook.protocol.messages, the same wrapper tests/support/raw.py uses); answers are decoded by the same
classes into plain dicts, then normalized (ALLOWED below) and compared.

    with Wire(kafka.bootstrap) as k, Wire(brook.bootstrap) as b:
        same = [w.send(ApiKey.METADATA, 12, {"topics": [{"name": "nope"}]}) for w in (k, b)]
        assert differences(*same) == []
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from brook.protocol.errors import ErrorCode
from brook.protocol.frames import request_frame
from brook.protocol.messages import decode_response, encode_request
from brook.protocol.versions import ApiKey, response_is_flexible

# What a broker answers that is its own and not the protocol's, so not compared:
ALLOWED: dict[str, str] = {
    "throttle_time_ms": "quota throttling is timing",
    "error_message": "free text: each broker words its own (the error code is compared)",
    "cluster_id": "each cluster's own id",
    "controller_id": "node ids are each cluster's own (see NODE_FIELDS for leaders and replicas)",
    "brokers": "hosts, ports and node ids of each cluster",
    "host": "each broker's own address (FindCoordinator, DescribeCluster)",
    "port": "each broker's own address",
    "supported_features": "Kafka's feature flags (metadata.version, group.version ...): KRaft's, not Brook's",
    "finalized_features": "as supported_features",
    "finalized_features_epoch": "as supported_features",
    "zk_migration_ready": "KRaft's ZooKeeper migration, which Brook never had",
    "log_append_time_ms": "wall-clock time of the append",
    "current_state_timestamp": "wall-clock time",
    "transaction_start_time_ms": "wall-clock time",
    "last_timestamp": "wall-clock time (DescribeProducers)",
    "endpoint_type": "DescribeCluster v1: Kafka's controllers' endpoints are its own",
}
# Fields whose values are node ids: the broker's own id reads "self", any other stays (-1: none).
NODE_FIELDS = {
    "leader_id",
    "node_id",
    "replica_nodes",
    "isr_nodes",
    "offline_replicas",
    "coordinator_id",
    "preferred_read_replica",
    "eligible_leader_replicas",
    "last_known_elr",
}
# Generated ids and random uuids: only whether one was given is compared.
GENERATED = {"topic_id", "member_id", "producer_id", "session_id", "leader"}
# The key that orders list items where brokers may answer in any order.
ORDER_KEYS = (
    "name",
    "topic",
    "partition_index",
    "index",
    "api_key",
    "resource_name",
    "group_id",
    "key",
    "transactional_id",
)

CLOSED = "<connection closed without an answer>"


def error_name(code: int) -> str:
    try:
        return f"{ErrorCode(code).name}({code})"
    except ValueError:
        return f"error {code}"


class Wire:
    """One connection to a broker speaking raw requests."""

    def __init__(self, bootstrap: str, timeout: float = 15.0, *, authenticated: bool = True) -> None:
        """`authenticated=False`: a SASL listener, where no Metadata may come first to learn the node id."""
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._cid = 0
        self.node_id = -1
        meta = self.send(ApiKey.METADATA, 12, {"topics": []}, normalize=False) if authenticated else None
        if isinstance(meta, dict):
            # The broker this connection reaches: the one listening on `port`.
            self.node_id = next((b["node_id"] for b in meta["brokers"] if b["port"] == int(port)), -1)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(
        self, api_key: int, version: int, fields: Mapping[str, Any], *, normalize: bool = True
    ) -> dict[str, Any] | str:
        """The decoded answer as a plain dict (normalized unless told), or CLOSED."""
        return self.send_body(api_key, version, encode_request(api_key, version, fields), normalize=normalize)

    def send_body(
        self, api_key: int, version: int, body: bytes, *, normalize: bool = True
    ) -> dict[str, Any] | str:
        """A request body as given (e.g. deliberately corrupt); the answer as `send` returns it."""
        self._cid += 1
        try:
            self.sock.sendall(request_frame(api_key, version, self._cid, "differential", body))
            frame = self._frame()
        except (ConnectionError, TimeoutError, OSError):
            return CLOSED
        if frame is None:
            return CLOSED
        cid = struct.unpack_from(">i", frame)[0]
        assert cid == self._cid, (cid, self._cid)
        skip = 5 if response_is_flexible(api_key, version) else 4
        # ApiVersions with an unsupported version is answered as v0 (KIP-511).
        if api_key == ApiKey.API_VERSIONS and struct.unpack_from(">h", frame, 4)[0] == 35:
            version = 0
        answer: dict[str, Any] = decode_response(api_key, version, memoryview(frame)[skip:]).to_dict()
        return self.normalized(answer) if normalize else answer

    def _frame(self) -> bytes | None:
        head = self._exact(4)
        if head is None:
            return None
        return self._exact(struct.unpack(">i", head)[0])

    def _exact(self, n: int) -> bytes | None:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                return None
            out += chunk
        return bytes(out)

    def normalized(self, value: Any, field: str = "") -> Any:
        """ALLOWED fields dropped, node ids, generated ids and error codes made comparable."""
        if isinstance(value, dict):
            return {k: self.normalized(v, k) for k, v in value.items() if k not in ALLOWED}
        if isinstance(value, list):
            items = [self.normalized(v, field) for v in value]
            if items and all(isinstance(i, dict) for i in items):
                key = next((k for k in ORDER_KEYS if all(k in i for i in items)), None)
                if key is not None:
                    items.sort(key=lambda i: str(i[key]))
            return items
        if field in NODE_FIELDS and isinstance(value, int) and value >= 0:
            return "self" if value == self.node_id else "other"
        if field in GENERATED:
            return (
                "<generated>"
                if value not in (None, "", -1, 0, "00000000-0000-0000-0000-000000000000")
                else value
            )
        if field == "error_code" and isinstance(value, int):
            return error_name(value)
        return value


def differences(kafka: Any, brook: Any, *, path: str = "", ignore: Iterable[str] = ()) -> list[str]:
    """Every path where Brook's normalized answer differs from Kafka's; `ignore`: paths (or their ends,
    e.g. "partitions[0].high_watermark" or "leader_epoch") a test allows to differ."""
    skip = set(ignore)
    if path and (path in skip or path.rsplit(".", 1)[-1].split("[")[0] in skip):
        return []
    if isinstance(kafka, dict) and isinstance(brook, dict):
        out: list[str] = []
        for k in sorted(set(kafka) | set(brook)):
            sub = f"{path}.{k}" if path else k
            if k not in brook:
                out.append(f"{sub}: Kafka {kafka[k]!r}, Brook has no such field")
            elif k not in kafka:
                out.append(f"{sub}: Brook {brook[k]!r}, Kafka has no such field")
            else:
                out += differences(kafka[k], brook[k], path=sub, ignore=skip)
        return out
    if isinstance(kafka, list) and isinstance(brook, list):
        if len(kafka) != len(brook):
            return [f"{path}: Kafka {len(kafka)} items {kafka!r}, Brook {len(brook)} items {brook!r}"]
        return [
            d
            for i, (a, b) in enumerate(zip(kafka, brook, strict=True))
            for d in differences(a, b, path=f"{path}[{i}]", ignore=skip)
        ]
    return [] if kafka == brook else [f"{path or 'answer'}: Kafka {kafka!r}, Brook {brook!r}"]


def agree(
    kafka: Wire,
    brook: Wire,
    api_key: int,
    version: int,
    fields: Mapping[str, Any],
    ignore: Iterable[str] = (),
) -> Any:
    """Sends one request to both; fails the test with every difference; returns Kafka's answer."""
    k, b = kafka.send(api_key, version, fields), brook.send(api_key, version, fields)
    diff = differences(k, b, ignore=ignore)
    assert not diff, f"{ApiKey(api_key).name} v{version} {dict(fields)}:\n  " + "\n  ".join(diff)
    return k
