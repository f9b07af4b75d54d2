"""The segment walk that rebuilds indexes (index_entries) stops at exactly the batch iter_batches, the
header-parsing walk, stops at, whatever the file holds: torn tails, flipped bytes, bad lengths."""

from __future__ import annotations

import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.records import batch

from brook.log.batch_scan import index_entries, iter_batches
from brook.protocol.batch import set_base_offset


def segment_bytes(sizes: list[int]) -> bytes:
    out = bytearray()
    offset = 0
    for i, n in enumerate(sizes):
        b = bytearray(batch([bytes([i % 256]) * (i % 7) for _ in range(n)], timestamp=1_000 + i))
        set_base_offset(b, 0, offset)
        offset += n
        out += b
    return bytes(out)


def walks(data: bytes, verify_crc: bool) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        fd, end = f.fileno(), len(data)
        headers = [
            (pos, h.base_offset, h.last_offset, h.size, h.max_timestamp)
            for pos, h in iter_batches(fd, 0, end, verify_crc=verify_crc)
        ]
        return headers, list(index_entries(fd, 0, end, verify_crc=verify_crc))


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=12),
    cut=st.integers(0, 40),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=3),
    verify_crc=st.booleans(),
)
def test_both_walks_stop_at_the_same_batch(
    sizes: list[int], cut: int, flips: list[tuple[int, int]], verify_crc: bool
) -> None:
    data = bytearray(segment_bytes(sizes))
    for at, xor in flips:
        data[at % len(data)] ^= xor
    data = data[: max(len(data) - cut, 0)]
    headers, entries = walks(bytes(data), verify_crc)
    assert entries == headers


def test_a_torn_last_batch_is_not_walked_even_without_crcs() -> None:
    data = segment_bytes([3, 3, 3])
    whole, _ = walks(data, False)
    headers, entries = walks(data[:-1], False)
    assert entries == headers == whole[:2]


def test_a_large_batch_past_the_crc_window_is_read_whole() -> None:
    big = batch([os.urandom(1 << 20), os.urandom(1 << 19)])
    headers, entries = walks(segment_bytes([2]) + big, True)
    assert len(entries) == 2 and entries == headers
