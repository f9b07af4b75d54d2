"""ApiVersions and requests at versions a broker does not know."""

from __future__ import annotations

import socket
import struct
from typing import Any

import pytest

from brook.protocol.frames import request_frame
from brook.protocol.messages import encode_request
from brook.protocol.primitives import Reader
from brook.protocol.versions import ApiKey
from tests.support.differential import CLOSED, Wire, agree, differences

pytestmark = pytest.mark.slow

# Deliberate differences in the advertised ranges, besides maxima below Kafka's (versions Brook does not
# implement yet; clients take the highest both know):
DELIBERATE_MIN = {
    # Kafka 4.0 dropped v0-1 (KIP-896); Brook still answers them (the field ranges of the specs encode them).
    ApiKey.OFFSET_FOR_LEADER_EPOCH: "v0-1 still answered",
}


def ranges(answer: Any) -> dict[int, tuple[int, int]]:
    return {a["api_key"]: (a["min_version"], a["max_version"]) for a in answer["api_keys"]}


def test_api_versions_ranges(wires: tuple[Wire, Wire]) -> None:
    """Every API Brook advertises, Kafka does; from the same lowest version, up to at most Kafka's."""
    k, b = wires
    req = {"client_software_name": "brook-differential", "client_software_version": "1.0"}
    kafka, brook = (ranges(w.send(ApiKey.API_VERSIONS, 3, req, normalize=False)) for w in (k, b))
    wrong = []
    for key, (lo, hi) in sorted(brook.items()):
        if key not in kafka:
            wrong.append(f"{ApiKey(key).name}: Kafka does not advertise it")
            continue
        klo, khi = kafka[key]
        if lo != klo and key not in DELIBERATE_MIN:
            wrong.append(f"{ApiKey(key).name}: Brook from v{lo}, Kafka from v{klo}")
        if hi > khi:
            wrong.append(f"{ApiKey(key).name}: Brook up to v{hi}, Kafka only to v{khi}")
    assert not wrong


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_answers(wires: tuple[Wire, Wire], version: int) -> None:
    k, b = wires
    req = {"client_software_name": "librdkafka", "client_software_version": "2.16.0"}
    # The lists differ (test_api_versions_ranges); the error code and the shape do not.
    agree(k, b, ApiKey.API_VERSIONS, version, req, ignore=["api_keys"])


@pytest.mark.parametrize("name", ["bad name!", "", "-lead", "trail-", "ok.name"])
def test_api_versions_software_names(wires: tuple[Wire, Wire], name: str) -> None:
    """KIP-511: client_software_name/version must match [a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?,
    else INVALID_REQUEST with no API list."""
    k, b = wires
    req = {"client_software_name": name, "client_software_version": "1.0"}
    answer = agree(k, b, ApiKey.API_VERSIONS, 3, req, ignore=["api_keys"] if name == "ok.name" else [])
    assert (answer["error_code"] == "NONE(0)") == (name == "ok.name")


def test_api_versions_too_new(peers: tuple[str, str]) -> None:
    """A version past every broker's: UNSUPPORTED_VERSION in a v0 body naming ApiVersions' own range
    (Brook listed every API before 2026-11-27)."""
    body = encode_request(ApiKey.API_VERSIONS, 0, {})
    answers = []
    for bootstrap in peers:
        with Wire(bootstrap) as w:
            answers.append(w.send_body(ApiKey.API_VERSIONS, 127, body))
    kafka, brook = answers
    assert isinstance(kafka, dict) and isinstance(brook, dict)
    assert kafka["error_code"] == brook["error_code"] == "UNSUPPORTED_VERSION(35)"
    assert [a["api_key"] for a in kafka["api_keys"]] == [a["api_key"] for a in brook["api_keys"]] == [18]


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(ApiKey.METADATA, 14), (200, 0), (ApiKey.FETCH, 3), (ApiKey.LIST_OFFSETS, 0), (ApiKey.OFFSET_COMMIT, 1)],
    ids=["metadata-v14", "api-key-200", "fetch-v3", "list-offsets-v0", "offset-commit-v1"],
)
def test_unknown_versions_close_the_connection(peers: tuple[str, str], api_key: int, version: int) -> None:
    """A request neither broker can parse (an unknown key, a version past or below its range): the
    connection is closed without an answer, by both."""
    body = encode_request(ApiKey.METADATA, 12, {"topics": []})
    for bootstrap in peers:
        with Wire(bootstrap) as w:
            assert w.send_body(api_key, version, body) == CLOSED, bootstrap


def _bodies() -> dict[str, tuple[int, int, bytes]]:
    """Malformed request bodies: (API key, version, body)."""
    meta = encode_request(ApiKey.METADATA, 12, {"topics": [{"name": "p-topic"}]})
    create = encode_request(
        ApiKey.CREATE_TOPICS,
        7,
        {"topics": [{"name": "p-topic", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 1000},
    )
    # Metadata v12's body: topics (compact array: count + 1), then the first topic's uuid and name.
    long_name = meta[:17] + b"\x7f" + meta[18:]  # the name's compact length (varint) says 126 bytes
    return {
        "truncated": (ApiKey.METADATA, 12, meta[:-3]),
        "compact-string-too-long": (ApiKey.METADATA, 12, long_name),
        "compact-array-too-long": (ApiKey.METADATA, 12, b"\x7f" + meta[1:]),
        "negative-array": (ApiKey.METADATA, 4, b"\xff\xff\xff\xfe\x00"),
        "create-truncated": (ApiKey.CREATE_TOPICS, 7, create[: len(create) // 2]),
        "empty-body": (ApiKey.CREATE_TOPICS, 7, b""),
    }


@pytest.mark.parametrize("case", list(_bodies()))
def test_malformed_bodies(peers: tuple[str, str], case: str) -> None:
    """Bodies that cannot be parsed (lengths past the end, truncated): neither broker answers, both
    close the connection. Known difference: a negative array count other than -1 (no client sends
    one) is null to Kafka (Metadata: every topic) and empty to Brook (kafka-python's decoder)."""
    api_key, version, body = _bodies()[case]
    answers = []
    for bootstrap in peers:
        with Wire(bootstrap) as w:
            answers.append(w.send_body(api_key, version, body))
    if case == "negative-array":
        assert all(isinstance(a, dict) for a in answers), answers
        return
    assert not differences(*answers)
    assert answers[0] == CLOSED, answers


def features(w: Wire, version: int) -> dict[int, dict[str, tuple[int, int]] | int]:
    """ApiVersions' tag section, from the raw answer: 0 the supported features, 1 the finalized
    features' epoch, 2 the finalized features (name -> (min, max))."""
    body = encode_request(
        ApiKey.API_VERSIONS, version, {"client_software_name": "t", "client_software_version": "1"}
    )
    w.sock.sendall(request_frame(ApiKey.API_VERSIONS, version, 99, "differential", body))
    size = struct.unpack(">i", w.sock.recv(4, socket.MSG_WAITALL))[0]
    r = Reader(memoryview(w.sock.recv(size, socket.MSG_WAITALL)), 4)  # past the correlation id
    assert r.int16() == 0
    for _ in range(r.compact_array_len()):
        r.int16(), r.int16(), r.int16(), r.skip_tagged_fields()
    r.int32()
    out: dict[int, dict[str, tuple[int, int]] | int] = {}
    for tag, data in r.tagged_fields():
        t = Reader(data)
        if tag == 1:
            out[tag] = t.int64()
            continue
        found = {}
        for _ in range(t.compact_array_len()):
            name, lo, hi = t.compact_string(), t.int16(), t.int16()
            t.skip_tagged_fields()
            found[name] = (lo, hi)
        out[tag] = found
    return out


@pytest.mark.parametrize("version", [3, 4])
def test_group_version_feature(wires: tuple[Wire, Wire], version: int) -> None:
    """group.version, the consumer group protocol's feature: finalized at 1, and supported from 0 to
    1 (named from v4 only: below, Kafka leaves out features whose lowest version is 0, KIP-1022);
    share.version (share groups) likewise, finalized at 2 and supported from 0 to 2."""
    kafka, brook = (features(w, version) for w in wires)
    for tag in (0, 2):
        k, b = kafka[tag], brook[tag]
        assert isinstance(k, dict) and isinstance(b, dict)
        for name in ("group.version", "share.version"):
            assert k.get(name) == b.get(name), (tag, name, k, b)
    assert brook[2] == {"group.version": (1, 1), "share.version": (2, 2)}
    assert isinstance(brook[1], int) and brook[1] >= 0
