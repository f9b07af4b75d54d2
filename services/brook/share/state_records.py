"""The `__share_group_state` records: one share-partition's state per key, the latest record wins.

Brook's own format, not Kafka's ShareSnapshot/ShareUpdate records (the topic is compacted, and each
record is a whole snapshot, so no update needs replaying onto another):

- key: b"brook-share-v1\\0" + group id (UTF-8) + b"\\0" + topic id (16 bytes) + partition (int32 BE)
- value: JSON {"epoch": state epoch, "start": start offset, "end": end offset,
  "runs": [[first offset, last offset, state, delivery count], ...]} for the in-flight records
  (states as Kafka's RecordState: 0 available, 2 acknowledged, 4 archived); null: the state is deleted.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

__all__ = [
    "ShareKey",
    "ShareSnapshot",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "key_hash",
]

_PREFIX = b"brook-share-v1\0"
_I = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class ShareKey:
    group_id: str
    topic_id: bytes
    partition: int


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    state_epoch: int
    start_offset: int
    end_offset: int
    runs: tuple[tuple[int, int, int, int], ...]


def encode_key(k: ShareKey) -> bytes:
    return _PREFIX + k.group_id.encode() + b"\0" + k.topic_id + _I.pack(k.partition)


def decode_key(raw: bytes) -> ShareKey | None:
    """None for a key of another format."""
    if not raw.startswith(_PREFIX) or len(raw) < len(_PREFIX) + 21:
        return None
    body = raw[len(_PREFIX) :]
    group = body[:-21].decode()
    return ShareKey(group, bytes(body[-20:-4]), _I.unpack(body[-4:])[0])


def encode_value(s: ShareSnapshot) -> bytes:
    doc = {"epoch": s.state_epoch, "start": s.start_offset, "end": s.end_offset, "runs": list(s.runs)}
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_value(raw: bytes) -> ShareSnapshot:
    doc = json.loads(raw)
    runs = tuple((int(a), int(b), int(c), int(d)) for a, b, c, d in doc["runs"])
    return ShareSnapshot(int(doc["epoch"]), int(doc["start"]), int(doc["end"]), runs)


def key_hash(k: ShareKey) -> int:
    """A stable hash (not Python's salted one): which state partition holds the key."""
    h = 0
    for b in encode_key(k):
        h = (h * 31 + b) & 0x7FFFFFFF
    return h
