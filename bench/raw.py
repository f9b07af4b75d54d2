"""Raw benchmark output: every run's samples as JSON next to the printed table, so a row of
docs/benchmarks.md can be traced to the runs it came from (docs cite the file by name)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(obj).items()}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


def save(bench: str, machine: str, results: Any, directory: Path | None = None) -> Path:
    """Write bench/results/<bench>-<UTC time>.json: the command line, the machine line, the samples."""
    directory = directory or RESULTS
    directory.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = directory / f"{bench}-{stamp}.json"
    doc = {"bench": bench, "argv": sys.argv, "machine": machine, "results": _plain(results)}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"raw results: {path}", flush=True)
    return path
