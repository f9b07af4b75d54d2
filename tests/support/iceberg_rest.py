"""Apache Iceberg's own REST catalog server as a real peer: org.apache.iceberg.rest.RESTCatalogServer (from
iceberg-open-api's test fixtures, the server of Iceberg's REST compatibility kit), a JdbcCatalog on SQLite
behind Iceberg's RESTCatalogServlet on Jetty, run with the classpath `scripts/setup-iceberg-rest` resolved.

    with IcebergRestServer(tmp_path / "rest") as rest:
        BrokerProcess(..., args=["--iceberg-catalog-uri", rest.uri])
        load_catalog("brook", type="rest", uri=rest.uri)

The server reads its catalog's properties from CATALOG_* variables (RCKUtils.environmentCatalogConfig:
CATALOG_WAREHOUSE is `warehouse`, CATALOG_REST_PORT is `rest.port`); it hands out table locations under
its warehouse, a local directory here, where the broker's pyiceberg writes the data files and the
server's HadoopFileIO the table metadata. The server takes no host (Jetty's Server(port)): it listens on
every interface, and the tests talk to it on 127.0.0.1.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from .jvm import JVM_OPTS, java_bin
from .ports import free_port

REPO = Path(__file__).resolve().parents[2]
MAIN = "org.apache.iceberg.rest.RESTCatalogServer"


def classpath() -> str:
    path = REPO / ".venv" / "iceberg-rest-classpath.txt"
    if not path.exists():
        raise RuntimeError(f"{path} is missing: run scripts/setup-iceberg-rest (scripts/setup --test does)")
    return path.read_text().strip()


class IcebergRestServer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.warehouse = root / "warehouse"
        self.log_path = root / "iceberg-rest.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> IcebergRestServer:
        self.warehouse.mkdir(parents=True, exist_ok=True)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CATALOG_")},
            "CATALOG_REST_PORT": str(self.port),
            "CATALOG_WAREHOUSE": self.warehouse.resolve().as_uri(),
            # A file, not the server's default jdbc:sqlite::memory:, where each pooled connection
            # would be a database of its own once two requests overlap. Two pooled connections
            # committing at once wait for SQLite's write lock (busy_timeout) instead of failing
            # with SQLITE_BUSY: on a loaded machine the server answered a partition's commits 500
            # "database is locked" for a minute.
            "CATALOG_URI": f"jdbc:sqlite:{(self.root / 'catalog.db').resolve()}?busy_timeout=30000",
        }
        cmd = [java_bin(), *JVM_OPTS, "-cp", classpath(), MAIN]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.uri}/v1/config", timeout=5) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Iceberg REST catalog server did not start; log: {self.log_path}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def __enter__(self) -> IcebergRestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
