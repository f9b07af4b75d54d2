"""FrameBuffer: size-prefixed frames, fed the way a socket fills a BufferedProtocol's buffer."""

from __future__ import annotations

import pytest

from brook.protocol.frame_buffer import (
    BIG_START_BYTES,
    SCRATCH_BYTES,
    SCRATCH_START_BYTES,
    FrameBuffer,
    FrameTooLarge,
)


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def feed(buf: FrameBuffer, data: bytes, chunk: int) -> None:
    """Write `data` into the buffer's views at most `chunk` bytes at a time (as recv_into would)."""
    pos = 0
    while pos < len(data):
        view = buf.view()
        n = min(chunk, len(view), len(data) - pos)
        assert n > 0, "the buffer offered no room"
        view[:n] = data[pos : pos + n]
        buf.received(n)
        pos += n


@pytest.mark.parametrize("chunk", [1, 3, 4096, 10**9])
def test_small_and_large_frames_come_out_whole_in_order(chunk: int) -> None:
    payloads = [b"a" * 10, b"", b"b" * (SCRATCH_BYTES - 4), b"c" * (3 * BIG_START_BYTES + 5), b"d" * 7]
    buf = FrameBuffer(max_frame_bytes=10 * BIG_START_BYTES)
    data = b"".join(frame(p) for p in payloads)
    feed(buf, data, chunk if chunk < 10**9 else len(data))
    assert [bytes(f) for f in buf.frames] == payloads
    assert all(isinstance(f, bytearray) for f in buf.frames)  # writable: offsets are set in place


def test_a_large_frame_buffer_grows_with_the_bytes_not_with_its_header() -> None:
    buf = FrameBuffer(max_frame_bytes=2**31 - 1)
    feed(buf, (2**31 - 2).to_bytes(4, "big") + b"x" * 100, chunk=10**6)
    assert not buf.frames
    assert len(buf.view()) <= BIG_START_BYTES  # room offered: the first buffer, not 2 GiB


@pytest.mark.parametrize("size", [-1, 1001])
def test_a_frame_over_the_limit_or_negative_is_refused(size: int) -> None:
    buf = FrameBuffer(max_frame_bytes=1000)
    view = buf.view()
    view[:4] = size.to_bytes(4, "big", signed=True)
    with pytest.raises(FrameTooLarge) as e:
        buf.received(4)
    assert e.value.size == size and e.value.limit == 1000


def test_the_scratch_buffer_starts_small_and_grows_while_reads_fill_it() -> None:
    buf = FrameBuffer(max_frame_bytes=10**6)
    assert len(buf.view()) == SCRATCH_START_BYTES  # an idle connection holds 4 KiB
    payloads = [bytes([i % 256]) * 100 for i in range(2000)]  # 208,000 bytes of small frames
    feed(buf, b"".join(frame(p) for p in payloads), chunk=10**9)  # each read takes all it is offered
    assert [bytes(f) for f in buf.frames] == payloads
    assert len(buf.view()) + buf._fill == SCRATCH_BYTES  # grown to the most one read takes
