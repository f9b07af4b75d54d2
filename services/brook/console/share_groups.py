"""Share groups (KIP-932) for `brook group`: confluent-kafka's AdminClient has no share-group calls
(2.16), so these speak Kafka's protocol themselves, with the wire codec's messages: ListGroups
(type share) to every broker, ShareGroupDescribe, DescribeShareGroupOffsets and
AlterShareGroupOffsets to the group's coordinator. Plaintext listeners only: with `-X
security.protocol=...` other than PLAINTEXT share groups are not shown.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from brook.protocol.errors import ErrorCode
from brook.protocol.frames import parse_response_header, request_frame
from brook.protocol.versions import ApiKey, response_is_flexible

from .common import TIMEOUT_S, CommandError

__all__ = ["ShareClient", "plaintext"]

_CLIENT_ID = "brook-cli"


def plaintext(settings: Sequence[str] | None) -> bool:
    """Whether the client settings leave the connection plaintext (what ShareClient speaks)."""
    for item in settings or []:
        key, _, value = item.partition("=")
        if key.strip() == "security.protocol" and value.strip().upper() != "PLAINTEXT":
            return False
    return True


def _address(hostport: str) -> tuple[str, int]:
    host, _, port = hostport.strip().rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class _Connection:
    def __init__(self, address: tuple[str, int]) -> None:
        try:
            self._sock = socket.create_connection(address, timeout=TIMEOUT_S)
        except OSError as e:
            raise CommandError(f"cannot reach {address[0]}:{address[1]}: {e}") from None
        self._cid = 0

    def call(self, api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
        # Here, not at the top: kafka-python's classes take 0.2 s to import, which every `brook`
        # client command would pay for the share-group ones.
        from brook.protocol import messages

        self._cid += 1
        body = messages.encode_request(api_key, version, fields)
        try:
            self._sock.sendall(request_frame(api_key, version, self._cid, _CLIENT_ID, body))
            size = struct.unpack(">i", self._read(4))[0]
            frame = self._read(size)
        except OSError as e:
            raise CommandError(f"request to the broker failed: {e}") from None
        _, payload = parse_response_header(frame, response_is_flexible(api_key, version))
        return messages.decode_response(api_key, version, payload)

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self._sock.recv(n - len(out))
            if not chunk:
                raise OSError("connection closed by the broker")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self._sock.close()


def _check(code: int, message: str | None, what: str) -> None:
    if code:
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        raise CommandError(f"{what}: {name}" + (f" ({message})" if message else ""))


class ShareClient:
    """One bootstrap connection, and the coordinator's when a group is named."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = _Connection(_address(bootstrap.split(",")[0]))

    def close(self) -> None:
        self._bootstrap.close()

    def _brokers(self) -> list[tuple[str, int]]:
        md = self._bootstrap.call(ApiKey.METADATA, 12, {"topics": []})
        return [(b.host, b.port) for b in md.brokers]

    def list_groups(self) -> list[tuple[str, str]]:
        """(group, state) of every share group, from every broker."""
        found: dict[str, str] = {}
        for address in self._brokers():
            conn = _Connection(address)
            try:
                res = conn.call(ApiKey.LIST_GROUPS, 5, {"types_filter": ["share"]})
            finally:
                conn.close()
            _check(res.error_code, None, "list share groups")
            found.update({g.group_id: g.group_state for g in res.groups})
        return sorted(found.items())

    def _coordinator(self, group: str) -> _Connection:
        res = self._bootstrap.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
        [c] = res.coordinators
        _check(c.error_code, c.error_message, f"coordinator of {group}")
        return _Connection((c.host, c.port))

    def describe(self, group: str) -> tuple[Any, Any] | None:
        """(ShareGroupDescribe's group, DescribeShareGroupOffsets' group), None if not a share group."""
        conn = self._coordinator(group)
        try:
            res = conn.call(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group]})
            [desc] = res.groups
            if desc.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
                return None
            _check(desc.error_code, desc.error_message, f"describe {group}")
            res = conn.call(
                ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": group, "topics": None}]}
            )
            [offsets] = res.groups
            _check(offsets.error_code, offsets.error_message, f"offsets of {group}")
            return desc, offsets
        finally:
            conn.close()

    def alter_offsets(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        conn = self._coordinator(group)
        try:
            parts = [{"partition_index": p, "start_offset": o} for p, o in sorted(offsets.items())]
            res = conn.call(
                ApiKey.ALTER_SHARE_GROUP_OFFSETS,
                0,
                {"group_id": group, "topics": [{"topic_name": topic, "partitions": parts}]},
            )
        finally:
            conn.close()
        _check(res.error_code, res.error_message, f"reset offsets of {group}")
        for t in res.responses:
            for p in t.partitions:
                _check(p.error_code, p.error_message, f"reset {t.topic_name}-{p.partition_index}")
