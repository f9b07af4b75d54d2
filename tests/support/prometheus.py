"""A real Prometheus (Debian package `prometheus`) for tests: a free loopback port, a 1 s scrape
interval, targets from a file (rewrite it to add or remove targets, with labels such as `namespace`
and `pod` as a ServiceMonitor would attach). The first samples arrive ~6 s after start (target
discovery is throttled to 5 s): poll."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from .cluster import eventually
from .ports import free_port


class Prometheus:
    """Prometheus scraping the targets in a file every second (rewrite the file to add/remove brokers)."""

    def __init__(self, root: Path, rule_files: Sequence[Path] = ()) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.skip("the prometheus binary is not installed (apt-get install -y prometheus)")
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.targets_file = root / "targets.json"
        self.set_targets([])
        config = root / "prometheus.yml"
        config.write_text(
            json.dumps(
                {
                    "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(p) for p in rule_files],
                    "scrape_configs": [
                        {
                            "job_name": "brook",
                            "file_sd_configs": [
                                {"files": [str(self.targets_file)], "refresh_interval": "1s"}
                            ],
                        }
                    ],
                }
            )
        )
        self.log_path = root / "prometheus.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - the child's output, closed in stop()
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={root / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        eventually(self.ready, 15, "prometheus ready")

    def set_targets(
        self, targets: Sequence[str], labels: Mapping[str, Mapping[str, str]] | None = None
    ) -> None:
        """Scrape `targets` (host:port), each with its `labels[target]` if given."""
        groups = [{"targets": [t], "labels": dict((labels or {}).get(t, {}))} for t in targets]
        tmp = self.targets_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups))
        tmp.replace(self.targets_file)

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {self.log_path.read_text()[-2000:]}")
        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as r:
            return bool(r.status == 200)

    def get(self, path: str, **params: str) -> dict[str, Any]:
        """A GET of the HTTP API, decoded (e.g. get("/api/v1/rules"))."""
        url = f"{self.url}{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=5) as r:
            doc: dict[str, Any] = json.loads(r.read())
        return doc

    def wait_until(self, what: str, check: Callable[[], bool], timeout: float = 25.0) -> None:
        def alive_and(check: Callable[[], bool] = check) -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_path.read_text()[-2000:]}")
            return check()

        eventually(alive_and, timeout, what)

    def query(self, promql: str) -> list[dict[str, Any]]:
        doc = self.get("/api/v1/query", query=promql)
        assert doc["status"] == "success", doc
        result: list[dict[str, Any]] = doc["data"]["result"]
        return result

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
