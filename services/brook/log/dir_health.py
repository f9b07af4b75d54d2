"""Log directory health: a write that fails in a log directory takes the whole directory offline.

As Kafka's LogDirFailureChannel: every write path of the logs in a directory (append, segment roll,
index and checkpoint writes, flush, retention, truncation, compaction, opening) runs under `guard`. The
first OSError there (ENOSPC when the disk is full, EIO, EROFS, ...) marks the directory offline, once,
with one ERROR line naming the directory and the errno; the operation and every later one on a log of
the directory fails with KAFKA_STORAGE_ERROR, and nothing more is written there. In particular no
clean-shutdown marker is written, so the next open re-validates each log's tail (a batch cut short is
never served: it was never acknowledged).

The in-memory state of those logs is not trusted any more. The broker reopens them from disk, with
recovery, once `probe` says the directory takes writes again (space freed by retention, by deleted
topics or by an operator), or at the next start.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from brook.log.checkpoint import fsync_dir
from brook.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

PROBE_FILE = ".brook-write-probe"
_PROBE_BYTES = 4096


def _errno_name(e: OSError) -> str:
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno is not None else "no errno"


def _describe(e: OSError) -> str:
    return f"[{_errno_name(e)}] {e.strerror or e}"


class LogDirHealth:
    """Whether one log directory takes writes, and the guard its logs' writes run under."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.failure: str | None = None  # why it is offline (None: online)
        self.offline_since: float = 0.0  # time.monotonic() of the failure
        self.failures = 0  # times it went offline (tests, logs)
        self._reopening = False
        self._listeners: list[Callable[[LogDirHealth], None]] = []

    @property
    def offline(self) -> bool:
        return self.failure is not None

    def on_offline(self, listener: Callable[[LogDirHealth], None]) -> None:
        """Call `listener` (synchronously, from inside the failed operation) when the directory fails."""
        self._listeners.append(listener)

    def check(self) -> None:
        """KAFKA_STORAGE_ERROR while the directory is offline."""
        if self.failure is not None:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"log directory {self.path} is offline ({self.failure})"
            )

    def guard(self, action: str, target: str, *, while_offline: bool = False) -> _Guard:
        """`with health.guard("append to", "t-0"):` around a write path. Refused while offline (unless
        `while_offline`: deleting files, which frees space, still may); an OSError takes the directory
        offline and becomes KAFKA_STORAGE_ERROR."""
        if not while_offline:
            self.check()
        return _Guard(self, action, target)

    def fail(self, what: str, e: OSError) -> None:
        """Mark the directory offline (the first failure only: later ones are consequences)."""
        if self.failure is not None:
            return
        self.failure = f"{what}: {_describe(e)}"
        if self._reopening:  # still offline, not offline anew: the one reopening says so, seldom
            log.debug("log directory %s: reopening failed: %s", self.path, self.failure)
            return
        self.offline_since = time.monotonic()
        self.failures += 1
        log.error(
            "log directory %s is offline: %s failed with errno %s (%s); its partitions answer "
            "KAFKA_STORAGE_ERROR until it takes writes again",
            self.path,
            what,
            _errno_name(e),
            e.strerror or e,
        )
        for listener in list(self._listeners):
            listener(self)

    def probe(self, min_free_bytes: int) -> str | None:
        """None when the directory takes writes again: at least `min_free_bytes` free (so a freed
        handful of bytes does not bring it back only to fail at once) and a small file written, fsynced
        and removed. Otherwise why not. Changes nothing (see `reopening`)."""
        try:
            st = os.statvfs(self.path)
            free = st.f_bavail * st.f_frsize
            if free < min_free_bytes:
                return f"{free} bytes free, {min_free_bytes} wanted"
            path = self.path / PROBE_FILE
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, bytes(_PROBE_BYTES))
                os.fsync(fd)
            finally:
                os.close(fd)
                path.unlink(missing_ok=True)
            fsync_dir(self.path)
        except OSError as e:
            return _describe(e)
        return None

    @contextlib.contextmanager
    def reopening(self) -> Iterator[str | None]:
        """Online while the broker reopens the directory's logs (yields why it was offline): a failure
        meanwhile takes it offline again, as a failed probe would (no ERROR, no listeners: a read
        that fails for as long as a disk does would otherwise say so at every probe), any other
        exception puts it back offline as it was."""
        failure, self.failure = self.failure, None
        self._reopening = True
        try:
            yield failure
        except BaseException:
            if self.failure is None:
                self.failure = failure
            raise
        finally:
            self._reopening = False


class _Guard:
    """The context manager of `LogDirHealth.guard` (a class: cheaper than a generator on the hot path)."""

    __slots__ = ("_action", "_health", "_target")

    def __init__(self, health: LogDirHealth, action: str, target: str) -> None:
        self._health = health
        self._action = action
        self._target = target

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, e: BaseException | None, tb: object) -> None:
        if isinstance(e, OSError):
            what = f"{self._action} {self._target}"
            self._health.fail(what, e)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what} failed: {_describe(e)}") from e
