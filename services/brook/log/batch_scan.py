"""Walk the record batches stored in a segment file by their 61-byte headers, with pread."""

from __future__ import annotations

import os
from collections.abc import Iterator

from brook.protocol.batch import HEADER_SIZE, BatchHeader, crc_ok, parse_header
from brook.protocol.errors import KafkaError

# Header walks read a small window so several small batches come from one pread, without reading
# the bodies of large ones; CRC checks read whole batches, in large windows.
HEADER_WINDOW = 4096
CRC_WINDOW = 1 << 20


def iter_batches(
    fd: int, start: int, end: int, *, verify_crc: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in [start, end).

    Stops silently at the first batch that is torn (runs past `end`), unparseable or, with verify_crc,
    fails its CRC: recovery truncates there, and readers treat it as the end of the data.
    """
    window = CRC_WINDOW if verify_crc else HEADER_WINDOW
    buf = b""
    buf_start = start
    pos = start
    while pos + HEADER_SIZE <= end:
        if pos + HEADER_SIZE > buf_start + len(buf):
            buf = os.pread(fd, min(window, end - pos), pos)
            buf_start = pos
        try:
            header = parse_header(buf, pos - buf_start)
        except KafkaError:
            return
        size = header.size
        if pos + size > end:
            return
        if verify_crc:
            if pos + size > buf_start + len(buf):
                buf = os.pread(fd, min(max(window, size), end - pos), pos)
                buf_start = pos
                if len(buf) < size:
                    return
            if not crc_ok(buf, pos - buf_start, header):
                return
        yield pos, header
        pos += size
