"""A small filesystem for tests that fill a disk: a tmpfs of a few MiB mounted at a test's path."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_filesystem(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's syntax: "4m") at `path`, unmounted afterwards. Skips the test when it
    cannot be mounted (mounting needs root)."""
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a {size} tmpfs at {path} (mounting needs root): {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], capture_output=True, check=False)


def resize(path: Path, size: str) -> None:
    """Grow (or shrink) the tmpfs at `path`: an operator giving the volume more room."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], capture_output=True, check=True)


def ballast(path: Path, nbytes: int) -> Path:
    """A file taking `nbytes` of real space (written, not sparse), for a test to free later."""
    file = path / "ballast"
    with open(file, "wb") as f:
        f.write(b"\x01" * nbytes)
        f.flush()
        os.fsync(f.fileno())
    return file


def fill_up(path: Path) -> Path:
    """A file taking every byte left on the filesystem."""
    file = path / "filler"
    chunk = b"\x01" * 65536
    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while True:
            try:
                os.write(fd, chunk)  # cut short when the space runs out; the next one fails
            except OSError:
                break
    finally:
        os.close(fd)
    return file
