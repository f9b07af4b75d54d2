"""Disk and clock faults for one broker process.

`DiskFaults`: the LD_PRELOAD shim of faults/diskfault.c (built here with gcc, once per source) makes
calls on the files below a directory fail with EIO or ENOSPC (write, fsync, read) or fsync slowly, as
a control file says; `set()` rewrites it while the broker runs (the shim reads it every 50 ms).

`Clock`: libfaketime (Debian's `faketime`) shifts the wall clock of one process by an offset kept in
a file, changed at run time; the monotonic clock is left alone, as an NTP step leaves it. (So set,
libfaketime 0.9.10 makes Python's time.sleep fail with EINVAL; a broker never calls it.)
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

_SOURCE = Path(__file__).parent / "faults" / "diskfault.c"
_FAKETIME_LIBS = [
    Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"),
    Path("/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1"),
]


def shim() -> Path:
    """The built shim, in a cache keyed by its source (rebuilt when it changes)."""
    digest = hashlib.sha256(_SOURCE.read_bytes()).hexdigest()[:16]
    out = Path.home() / ".cache" / "brook-diskfault" / f"diskfault-{digest}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(tmp), str(_SOURCE), "-ldl"], check=True)
        tmp.rename(out)
    return out


class DiskFaults:
    def __init__(self, control: Path, directory: Path) -> None:
        self.control = control
        self.directory = directory.resolve()
        self.set()

    def env(self) -> dict[str, str]:
        return {
            "LD_PRELOAD": str(shim()),
            "DISKFAULT_CTL": str(self.control),
            "DISKFAULT_PREFIX": str(self.directory) + "/",
        }

    def set(self, **faults: str | int) -> None:
        """E.g. set(write="EIO"), set(fsync="ENOSPC"), set(read="EIO"), set(fsync_delay_ms=800);
        set() clears them. In force within 50 ms (waited for here)."""
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text("".join(f"{k} {v}\n" for k, v in faults.items()))
        tmp.rename(self.control)
        time.sleep(0.1)


class Clock:
    def __init__(self, control: Path) -> None:
        self.control = control
        self.set(0)

    def env(self) -> dict[str, str]:
        lib = next((p for p in _FAKETIME_LIBS if p.exists()), _FAKETIME_LIBS[0])
        return {
            "LD_PRELOAD": str(lib),
            "FAKETIME_TIMESTAMP_FILE": str(self.control),
            # The file is read again every second (reading it at every call stalls a busy broker).
            "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_DONT_RESET": "1",
        }

    def set(self, offset_s: float) -> None:
        """The process's wall clock runs `offset_s` seconds from the real one (a jump, either way)."""
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(f"{offset_s:+.0f}\n")
        tmp.rename(self.control)
