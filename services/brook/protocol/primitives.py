"""Kafka wire primitives: a bounds-checked Reader over a memoryview and a bytearray-based Writer.

Every read is checked: truncation, negative lengths where the type forbids them, lengths past the end
and array counts larger than the bytes left all raise CodecError, never IndexError or struct.error,
so a hostile frame can neither crash a handler nor make us allocate from a forged length.
Byte payloads come back as memoryview slices of the frame (zero-copy); call bytes() to keep them.
"""

from __future__ import annotations

import struct

__all__ = ["CodecError", "Reader", "Writer", "uvarint_bytes", "uvarint_size"]


class CodecError(ValueError):
    """The bytes are not a valid encoding of what was expected (malformed or truncated request)."""


_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

_UVARINT_SMALL = [bytes((i,)) for i in range(128)]


def uvarint_bytes(value: int) -> bytes:
    """Unsigned varint (LEB128, at most 32 bits as Kafka uses it)."""
    if 0 <= value < 128:
        return _UVARINT_SMALL[value]
    if value < 0 or value > 0xFFFFFFFF:
        raise ValueError(f"uvarint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def uvarint_size(value: int) -> int:
    if value < 0x80:
        return 1
    if value < 0x4000:
        return 2
    if value < 0x200000:
        return 3
    if value < 0x10000000:
        return 4
    return 5


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units), so keys map to the partitions Kafka would use
    (groups to __consumer_offsets, transactional ids to __transaction_state)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


class Reader:
    """Sequential reader over one request body. `pos` is public so callers can slice around it."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0) -> None:
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self.buf = view
        self.pos = pos
        self.end = len(view)

    def remaining(self) -> int:
        return self.end - self.pos

    def expect_end(self) -> None:
        """Raise when bytes are left over: a well-formed request is consumed exactly."""
        if self.pos != self.end:
            raise CodecError(f"{self.end - self.pos} unexpected trailing bytes")

    def advance(self, n: int) -> int:
        """Consume n bytes and return where they start (for struct.unpack_from on `buf`)."""
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise CodecError(f"truncated: need {n} bytes at {pos}, have {self.end - pos}")
        self.pos = pos + n
        return pos

    # Fixed-width integers; the most used ones inline the bounds check (method calls dominate here).
    def int8(self) -> int:
        v: int = _I8.unpack_from(self.buf, self.advance(1))[0]
        return v

    def int16(self) -> int:
        pos = self.pos
        if pos + 2 > self.end:
            raise CodecError(f"truncated: need 2 bytes at {pos}")
        self.pos = pos + 2
        v: int = _I16.unpack_from(self.buf, pos)[0]
        return v

    def int32(self) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            raise CodecError(f"truncated: need 4 bytes at {pos}")
        self.pos = pos + 4
        v: int = _I32.unpack_from(self.buf, pos)[0]
        return v

    def int64(self) -> int:
        v: int = _I64.unpack_from(self.buf, self.advance(8))[0]
        return v

    def uint32(self) -> int:
        v: int = _U32.unpack_from(self.buf, self.advance(4))[0]
        return v

    def boolean(self) -> bool:
        return self.buf[self.advance(1)] != 0

    def uvarint(self) -> int:
        """Unsigned varint, at most 5 bytes / 32 bits (Kafka's UNSIGNED_VARINT)."""
        buf, pos, end = self.buf, self.pos, self.end
        if pos < end:
            b = buf[pos]
            if b < 0x80:  # the overwhelmingly common one-byte case
                self.pos = pos + 1
                return b
        value = 0
        shift = 0
        while True:
            if pos >= end:
                raise CodecError("truncated varint")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 28:
                raise CodecError("varint longer than 5 bytes")
        if value > 0xFFFFFFFF:
            raise CodecError("varint exceeds 32 bits")
        self.pos = pos
        return value

    def varint(self) -> int:
        """Signed zig-zag varint (32 bits)."""
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def varlong(self) -> int:
        """Signed zig-zag varint (64 bits, at most 10 bytes)."""
        buf, pos, end = self.buf, self.pos, self.end
        value = 0
        shift = 0
        while True:
            if pos >= end:
                raise CodecError("truncated varlong")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 63:
                raise CodecError("varlong longer than 10 bytes")
        if value > 0xFFFFFFFFFFFFFFFF:
            raise CodecError("varlong exceeds 64 bits")
        self.pos = pos
        return (value >> 1) ^ -(value & 1)

    def uuid(self) -> bytes:
        start = self.advance(16)
        return bytes(self.buf[start : start + 16])

    def raw(self, n: int) -> memoryview:
        """The next n bytes as a zero-copy slice."""
        start = self.advance(n)
        return self.buf[start : start + n]

    def skip(self, n: int) -> None:
        self.advance(n)

    # Strings: utf-8; invalid utf-8 is a CodecError like any other malformed input.
    def _text(self, n: int) -> str:
        start = self.advance(n)
        try:
            return str(self.buf[start : start + n], "utf-8")
        except UnicodeDecodeError as e:
            raise CodecError(f"invalid utf-8 in string: {e}") from None

    def string(self) -> str:
        pos, end = self.pos, self.end
        if pos + 2 > end:
            raise CodecError(f"truncated: need 2 bytes at {pos}")
        n = _I16.unpack_from(self.buf, pos)[0]
        pos += 2
        if n < 0:
            raise CodecError(f"negative string length {n}")
        if pos + n > end:
            raise CodecError(f"string of {n} bytes runs past the end")
        self.pos = pos + n
        try:
            return str(self.buf[pos : pos + n], "utf-8")
        except UnicodeDecodeError as e:
            raise CodecError(f"invalid utf-8 in string: {e}") from None

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise CodecError(f"invalid string length {n}")
        return self._text(n)

    def compact_string(self) -> str:
        n = self.uvarint()
        if n == 0:
            raise CodecError("null compact string where a string is required")
        return self._text(n - 1)

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint()
        if n == 0:
            return None
        return self._text(n - 1)

    # Bytes: zero-copy slices.
    def bytes_(self) -> memoryview:
        n = self.int32()
        if n < 0:
            raise CodecError(f"negative bytes length {n}")
        return self.raw(n)

    def nullable_bytes(self) -> memoryview | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise CodecError(f"invalid bytes length {n}")
        return self.raw(n)

    def compact_bytes(self) -> memoryview:
        n = self.uvarint()
        if n == 0:
            raise CodecError("null compact bytes where bytes are required")
        return self.raw(n - 1)

    def compact_nullable_bytes(self) -> memoryview | None:
        n = self.uvarint()
        if n == 0:
            return None
        return self.raw(n - 1)

    # Array lengths. Every element takes at least one byte, so a count larger than the bytes left is
    # malformed: rejecting it here stops a forged count from driving a long loop or a big allocation.
    def _check_count(self, n: int) -> int:
        if n > self.end - self.pos:
            raise CodecError(f"array count {n} exceeds the {self.end - self.pos} bytes left")
        return n

    def array_len(self) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            raise CodecError(f"truncated: need 4 bytes at {pos}")
        n: int = _I32.unpack_from(self.buf, pos)[0]
        self.pos = pos = pos + 4
        if n < 0:
            raise CodecError(f"negative array length {n}")
        if n > self.end - pos:
            raise CodecError(f"array count {n} exceeds the {self.end - pos} bytes left")
        return n

    def nullable_array_len(self) -> int | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise CodecError(f"invalid array length {n}")
        return self._check_count(n)

    def compact_array_len(self) -> int:
        n = self.uvarint()
        if n == 0:
            raise CodecError("null compact array where an array is required")
        return self._check_count(n - 1)

    def compact_nullable_array_len(self) -> int | None:
        n = self.uvarint()
        if n == 0:
            return None
        return self._check_count(n - 1)

    # Tagged fields (flexible versions).
    def skip_tagged_fields(self) -> None:
        buf, pos = self.buf, self.pos
        if pos < self.end and buf[pos] == 0:  # fast path: no tags
            self.pos = pos + 1
            return
        for _ in range(self._check_count(self.uvarint())):
            self.uvarint()
            self.skip(self.uvarint())

    def tagged_fields(self) -> list[tuple[int, memoryview]]:
        """All tagged fields as (tag, payload) pairs, for the few messages whose tags we read."""
        out: list[tuple[int, memoryview]] = []
        for _ in range(self._check_count(self.uvarint())):
            tag = self.uvarint()
            out.append((tag, self.raw(self.uvarint())))
        return out


class Writer:
    """Appends Kafka primitives to a bytearray. Hot paths pack with struct directly instead."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def __len__(self) -> int:
        return len(self.buf)

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uvarint(self, v: int) -> None:
        self.buf += uvarint_bytes(v)

    def varint(self, v: int) -> None:
        self.buf += uvarint_bytes(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> None:
        z = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
        while z >= 0x80:
            self.buf.append((z & 0x7F) | 0x80)
            z >>= 7
        self.buf.append(z)

    def uuid(self, v: bytes) -> None:
        if len(v) != 16:
            raise ValueError("uuid must be 16 bytes")
        self.buf += v

    def string(self, v: str) -> None:
        data = v.encode()
        self.buf += _I16.pack(len(data))
        self.buf += data

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf += b"\xff\xff"
        else:
            self.string(v)

    def compact_string(self, v: str) -> None:
        data = v.encode()
        self.buf += uvarint_bytes(len(data) + 1)
        self.buf += data

    def compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_string(v)

    def bytes_(self, v: bytes | bytearray | memoryview) -> None:
        self.buf += _I32.pack(len(v))
        self.buf += v

    def nullable_bytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.bytes_(v)

    def compact_bytes(self, v: bytes | bytearray | memoryview) -> None:
        self.buf += uvarint_bytes(len(v) + 1)
        self.buf += v

    def compact_nullable_bytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_bytes(v)

    def array_len(self, n: int | None) -> None:
        self.buf += _I32.pack(-1 if n is None else n)

    def compact_array_len(self, n: int | None) -> None:
        self.buf += uvarint_bytes(0 if n is None else n + 1)

    def tagged_fields_empty(self) -> None:
        self.buf.append(0)

    def tagged_fields(self, fields: list[tuple[int, bytes]]) -> None:
        """Tagged fields in ascending tag order, as the spec requires."""
        self.uvarint(len(fields))
        for tag, payload in sorted(fields, key=lambda f: f[0]):
            self.uvarint(tag)
            self.uvarint(len(payload))
            self.buf += payload
