from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brook.protocol import CodecError, Reader, Writer
from brook.protocol.primitives import uvarint_bytes, uvarint_size


def test_fixed_width_round_trip() -> None:
    w = Writer()
    w.int8(-5)
    w.int16(-300)
    w.int32(-70000)
    w.int64(-(2**40))
    w.uint32(2**32 - 1)
    w.boolean(True)
    w.uuid(b"\x07" * 16)
    r = Reader(w.getvalue())
    assert (r.int8(), r.int16(), r.int32(), r.int64(), r.uint32()) == (-5, -300, -70000, -(2**40), 2**32 - 1)
    assert r.boolean() is True
    assert r.uuid() == b"\x07" * 16
    assert r.remaining() == 0
    r.expect_end()


@given(st.integers(0, 2**32 - 1))
def test_uvarint_round_trip(v: int) -> None:
    data = uvarint_bytes(v)
    assert len(data) == uvarint_size(v)
    r = Reader(data)
    assert r.uvarint() == v
    r.expect_end()


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(v: int) -> None:
    w = Writer()
    w.varint(v)
    assert Reader(w.getvalue()).varint() == v


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(v: int) -> None:
    w = Writer()
    w.varlong(v)
    assert Reader(w.getvalue()).varlong() == v


@given(st.text(), st.none() | st.text(), st.binary())
def test_strings_and_bytes_round_trip(s: str, ns: str | None, b: bytes) -> None:
    w = Writer()
    w.string(s[:1000])
    w.nullable_string(ns)
    w.compact_string(s)
    w.compact_nullable_string(ns)
    w.bytes_(b)
    w.nullable_bytes(None)
    w.compact_bytes(b)
    w.compact_nullable_bytes(None)
    r = Reader(w.getvalue())
    assert r.string() == s[:1000]
    assert r.nullable_string() == ns
    assert r.compact_string() == s
    assert r.compact_nullable_string() == ns
    assert bytes(r.bytes_()) == b
    assert r.nullable_bytes() is None
    assert bytes(r.compact_bytes()) == b
    assert r.compact_nullable_bytes() is None
    r.expect_end()


def test_bytes_are_zero_copy_slices() -> None:
    frame = bytearray(b"\x00\x00\x00\x03abc")
    view = Reader(frame).bytes_()
    frame[4] = ord("x")
    assert bytes(view) == b"xbc"


@pytest.mark.parametrize(
    ("data", "read"),
    [
        (b"\x00", Reader.int16),
        (b"\x00\x00\x00", Reader.int32),
        (b"\x00" * 7, Reader.int64),
        (b"\x00" * 15, Reader.uuid),
        (b"\x80\x80", Reader.uvarint),
        (b"\xff\xff\xff\xff\xff\x01", Reader.uvarint),  # longer than 5 bytes
        (b"\xff\xff\xff\xff\x7f", Reader.uvarint),  # more than 32 bits
        (b"\xff\xff", Reader.string),  # null where not nullable
        (b"\xff\xfe", Reader.nullable_string),
        (b"\x00\x05abc", Reader.string),  # past the end
        (b"\x00\x02\xff\xfe", Reader.string),  # invalid utf-8
        (b"\x00", Reader.compact_string),
        (b"\x05ab", Reader.compact_nullable_string),
        (b"\xff\xff\xff\xff", Reader.bytes_),
        (b"\xff\xff\xff\xfe", Reader.nullable_bytes),
        (b"\x7f\xff\xff\xff", Reader.bytes_),
        (b"\x00", Reader.compact_bytes),
        (b"\xff\xff\xff\xff", Reader.array_len),
        (b"\x7f\xff\xff\xff", Reader.array_len),  # absurd count
        (b"\x00\x00\x00\x02\x00", Reader.nullable_array_len),
        (b"\x00", Reader.compact_array_len),
        (b"\x8f\xff\xff\xff\x0f", Reader.compact_nullable_array_len),
        (b"\x01\x00\x05ab", Reader.skip_tagged_fields),
        (b"\x05", Reader.skip_tagged_fields),
        (b"", Reader.skip_tagged_fields),
    ],
)
def test_malformed_raises_codec_error(data: bytes, read: object) -> None:
    with pytest.raises(CodecError):
        read(Reader(data))  # type: ignore[operator]


def test_nullable_and_compact_lengths() -> None:
    assert Reader(b"\xff\xff\xff\xff").nullable_array_len() is None
    assert Reader(b"\x00").compact_nullable_array_len() is None
    assert Reader(b"\x03ab").compact_array_len() == 2
    with pytest.raises(CodecError):
        Reader(b"\x00\x01").expect_end()


def test_tagged_fields() -> None:
    w = Writer()
    w.tagged_fields([(5, b"xy"), (1, b"")])
    w.tagged_fields_empty()
    r = Reader(w.getvalue())
    assert [(t, bytes(p)) for t, p in r.tagged_fields()] == [(1, b""), (5, b"xy")]
    r.skip_tagged_fields()
    r.expect_end()
    r = Reader(w.getvalue())
    r.skip_tagged_fields()
    assert r.remaining() == 1


def test_array_lengths_written() -> None:
    w = Writer()
    w.array_len(None)
    w.array_len(3)
    w.compact_array_len(None)
    w.compact_array_len(3)
    assert w.getvalue() == b"\xff\xff\xff\xff\x00\x00\x00\x03\x00\x04"
    assert len(w) == 10
