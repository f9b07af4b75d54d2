"""Hostile bytes never escape as anything but CodecError (or KafkaError).

Random bytes exercise the early checks; mutated valid encodings (bit flips, truncation, splices)
get past them into nested arrays, tags and length fields.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brook.protocol import (
    CodecError,
    KafkaError,
    decode_fetch_request,
    decode_produce_request,
    parse_request,
)
from brook.protocol.messages import _REQUESTS, decode_request

from .samples import sample

FUZZ = settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])

REQUEST_CASES = [(k, v) for k, cls in sorted(_REQUESTS.items()) for v in range(cls.max_version + 1)]


def _valid_body(api_key: int, version: int) -> bytes:
    cls = _REQUESTS[api_key]
    flexible = cls.flexible_version_q(version)
    return bytes(
        cls._struct.encode(sample(cls._struct, version), version=version, compact=flexible, tagged=flexible)
    )


VALID = {case: _valid_body(*case) for case in REQUEST_CASES}


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "cut", "insert"]))
        if not buf:
            op = "insert"
        i = draw(st.integers(0, max(len(buf) - 1, 0)))
        if op == "flip":
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            buf[i] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]))
        elif op == "cut":
            del buf[i:]
        else:
            buf[i:i] = draw(st.binary(max_size=6))
    return bytes(buf)


def _call(fn: Any, *args: Any) -> None:
    with contextlib.suppress(CodecError, KafkaError):
        fn(*args)


@FUZZ
@given(st.binary(max_size=300))
def test_parse_request_random(frame: bytes) -> None:
    _call(parse_request, frame)


@FUZZ
@given(st.integers(0, 12), st.binary(max_size=300))
def test_produce_random(version: int, body: bytes) -> None:
    _call(decode_produce_request, version, memoryview(body))


@FUZZ
@given(st.integers(4, 18), st.binary(max_size=300))
def test_fetch_random(version: int, body: bytes) -> None:
    _call(decode_fetch_request, version, memoryview(body))


@FUZZ
@given(st.sampled_from(REQUEST_CASES), st.binary(max_size=300))
def test_decode_request_random(case: tuple[int, int], body: bytes) -> None:
    _call(decode_request, case[0], case[1], memoryview(body))


@FUZZ
@given(st.data())
def test_decode_request_mutated(data: st.DataObject) -> None:
    api_key, version = data.draw(st.sampled_from(REQUEST_CASES))
    body = data.draw(mutated(VALID[(api_key, version)]))
    _call(decode_request, api_key, version, memoryview(body))


@FUZZ
@given(st.data())
def test_produce_mutated(data: st.DataObject) -> None:
    version = data.draw(st.integers(0, 12))
    body = data.draw(mutated(VALID[(0, version)]))
    _call(decode_produce_request, version, memoryview(body))


@FUZZ
@given(st.data())
def test_fetch_mutated(data: st.DataObject) -> None:
    version = data.draw(st.integers(4, 18))
    body = data.draw(mutated(VALID[(1, version)]))
    _call(decode_fetch_request, version, memoryview(body))


@FUZZ
@given(st.data())
def test_parse_request_mutated(data: st.DataObject) -> None:
    api_key, version = data.draw(st.sampled_from(REQUEST_CASES))
    flexible = _REQUESTS[api_key].flexible_version_q(version)
    header = api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + b"\x00\x00\x00\x01\x00\x03cli"
    frame = data.draw(mutated(header + (b"\x00" if flexible else b"") + VALID[(api_key, version)]))
    _call(parse_request, frame)


def test_valid_samples_decode() -> None:
    # The mutation corpus itself is valid for the hand-written decoders.
    for version in range(13):
        decode_produce_request(version, memoryview(VALID[(0, version)]))
    for version in range(4, 19):
        decode_fetch_request(version, memoryview(VALID[(1, version)]))
