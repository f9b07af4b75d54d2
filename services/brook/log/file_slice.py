"""A byte range of a segment file, and the read-only file object that backs it."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO


class SegmentFile(io.FileIO):
    """A segment file for pread and sendfile (read-only, or "a+" while the segment takes appends).

    Segments drop their reference instead of closing it when they are deleted or closed: a FileSlice
    being sent may still hold it, and closing it under an in-flight sendfile could let the descriptor
    be reused for another file. CPython closes it when the last reference goes, quietly (no
    ResourceWarning: leaving the close to the last holder is deliberate).
    """

    def __del__(self) -> None:
        self.close()


@dataclass(frozen=True, slots=True)
class FileSlice:
    """A byte range of a segment file, served with sendfile
    (loop.sendfile(transport, file, position, size)) or pread.

    `failed` is told of an error reading the file (its log directory's health, brook.log.dir_health): a
    slice is read when the response goes out, outside the log's guards, and a disk that fails there must
    take the directory offline as a failed read inside them does."""

    file: BinaryIO  # read-only and never seeked: only used with explicit offsets (pread/sendfile)
    position: int
    size: int
    failed: Callable[[OSError], None] | None = None

    def read(self) -> bytes:
        try:
            return self._pread()
        except OSError as e:
            self.report(e)
            raise

    def report(self, e: OSError) -> None:
        if self.failed is not None:
            self.failed(e)

    def _pread(self) -> bytes:
        fd = self.file.fileno()
        data = os.pread(fd, self.size, self.position)
        if len(data) == self.size:
            return data
        # pread of a regular file is short only at end of file; loop in case it is not.
        parts = [data]
        got = len(data)
        while got < self.size:
            more = os.pread(fd, self.size - got, self.position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)
