"""Size-prefixed frames received straight into their final buffers (for asyncio.BufferedProtocol).

Small frames accumulate in a scratch buffer and are copied out once each; a frame larger than the
scratch buffer gets a bytearray of its own that the socket reads into directly. The scratch buffer
starts small and grows while reads fill it (a busy connection), so an idle or short-lived connection
holds 4 KiB, not 64: memory follows traffic (15,000 idle connections would otherwise pin ~1 GB).
Used by the server's client connections (requests) and by a follower's connection to its leader
(responses), where a stream reader would copy every replicated byte twice more (into its buffer, then
out of it).
"""

from __future__ import annotations

from collections import deque

# Frames up to this size (with their 4-byte size) are received in the scratch buffer and copied out;
# larger ones are received into buffers of their own. Also the most one read takes for small frames.
SCRATCH_BYTES = 64 * 1024
SCRATCH_START_BYTES = 4 * 1024  # a new connection's; x4 each time a read fills it, up to SCRATCH_BYTES
# A large frame's buffer starts this big and doubles as bytes arrive, so a 4-byte size header alone
# cannot make the receiver allocate up to its maximum frame size (each doubling copies what arrived: a
# receiver that trusts the sizes it is sent starts bigger).
BIG_START_BYTES = 1024 * 1024


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit}")
        self.size = size
        self.limit = limit


class FrameBuffer:
    """`view()` is where the next bytes go; `received(n)` queues the frames they complete in `frames`."""

    def __init__(self, max_frame_bytes: int, big_start_bytes: int = BIG_START_BYTES) -> None:
        self.max = max_frame_bytes
        self._big_start = big_start_bytes
        self.frames: deque[bytearray] = deque()
        self.queued_bytes = 0  # of the frames in `frames` (take() them to keep it true)
        self._scratch = memoryview(bytearray(SCRATCH_START_BYTES))
        self._fill = 0  # bytes of the scratch buffer holding received data
        self._big: bytearray | None = None  # a large frame being received into its own buffer
        self._big_view = self._scratch
        self._big_fill = 0
        self._big_size = 0  # the frame's full size (its buffer may still be smaller)

    def take(self) -> bytearray:
        """The oldest complete frame (IndexError when there is none)."""
        frame = self.frames.popleft()
        self.queued_bytes -= len(frame)
        return frame

    def view(self) -> memoryview:
        if self._big is not None:
            return self._big_view[self._big_fill :]
        return self._scratch[self._fill :]

    def received(self, nbytes: int) -> None:
        """Account for `nbytes` written into the last view(); FrameTooLarge for an oversized frame (the
        buffer is then emptied: the stream cannot be followed any further)."""
        big = self._big
        if big is None:
            self._fill += nbytes
            filled = self._fill == len(self._scratch)
            self._split()
            if filled and len(self._scratch) < SCRATCH_BYTES:
                self._grow_scratch()
            return
        self._big_fill += nbytes
        if self._big_fill < self._big_size:
            if self._big_fill == len(big):  # full but the frame is not: grow (memory follows data)
                # A new buffer, not a resize: the transport may still hold a view of this one.
                grown = bytearray(min(2 * len(big), self._big_size))
                grown[: len(big)] = big
                self._big = grown
                self._big_view = memoryview(grown)
            return
        self.frames.append(big)
        self.queued_bytes += len(big)
        self._big = None
        self._big_view = self._scratch

    def _grow_scratch(self) -> None:
        # A new buffer, not a resize: the transport may still hold a view of this one. A large frame
        # that started meanwhile keeps its own buffer (and _big_view while it is filled).
        grown = memoryview(bytearray(min(4 * len(self._scratch), SCRATCH_BYTES)))
        grown[: self._fill] = self._scratch[: self._fill]
        if self._big is None:
            self._big_view = grown
        self._scratch = grown

    def _split(self) -> None:
        """Queue the scratch buffer's complete frames; start a large frame's own buffer."""
        view = self._scratch
        fill = self._fill
        pos = 0
        while fill - pos >= 4:
            size = int.from_bytes(view[pos : pos + 4], "big", signed=True)
            if size < 0 or size > self.max:
                self._fill = 0
                raise FrameTooLarge(size, self.max)
            start = pos + 4
            if fill - start >= size:
                # Writable: a Produce request's batches get their offsets in this buffer (no second copy).
                self.frames.append(bytearray(view[start : start + size]))
                self.queued_bytes += size
                pos = start + size
                continue
            if 4 + size > len(view):
                # Too large for the scratch buffer: receive the rest of it straight into its own buffer.
                have = fill - start
                frame = bytearray(min(size, max(self._big_start, have)))
                frame[:have] = view[start:fill]
                self._big = frame
                self._big_view = memoryview(frame)
                self._big_fill = have
                self._big_size = size
                pos = fill
            break
        if pos:
            rest = fill - pos
            if rest:
                view[:rest] = view[pos:fill]  # a partial frame header or frame: move it to the front
            self._fill = rest
