"""Brokers serving the schema registry (`--schema-registry-port`) and a small HTTP helper for its API."""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .broker import BrokerProcess
from .ports import free_port

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def registry_args(port: int | None = None) -> tuple[list[str], str]:
    """The broker flags that turn the registry on, and its URL."""
    port = port or free_port()
    return [
        "--schema-registry-host",
        "127.0.0.1",
        "--schema-registry-port",
        str(port),
    ], f"http://127.0.0.1:{port}"


def call(
    url: str,
    method: str = "GET",
    body: Any = None,
    raw: bytes | None = None,
    content_type: str = CONTENT_TYPE,
    timeout: float = 30.0,
) -> tuple[int, Any]:
    """(status, parsed JSON body) of one request; error statuses are answers too."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, text = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read()
    return status, json.loads(text) if text else None


def wait_serving(url: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if call(f"{url}/subjects", timeout=5)[0] == 200:
                return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the schema registry at {url} did not answer in {timeout}s")
        time.sleep(0.2)


@contextlib.contextmanager
def serving_broker(data_dir: Path) -> Iterator[tuple[BrokerProcess, str]]:
    """A broker serving the registry, and the registry's URL once it answers; stopped after."""
    args, url = registry_args()
    broker = BrokerProcess(data_dir, args=args).start()
    try:
        wait_serving(url)
        yield broker, url
    finally:
        broker.stop()
