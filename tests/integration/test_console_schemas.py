"""`brook schema ...` against a broker serving the schema registry: register, list, get, check, config and
delete, and the registry's refusals as one line and exit 1. The commands run in-process through typer's
runner (the same application `brook` runs), which spares a dozen interpreter start-ups."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from brook.console import app
from tests.support.registry import serving_broker

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving_broker(tmp_path_factory.mktemp("console-schemas") / "data") as (_, base):
        yield base


class Ran:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def brook(url: str, *args: str, check: bool = True) -> Ran:
    r = CliRunner().invoke(app, ["schema", *args], env={"BROOK_SCHEMA_REGISTRY": url})
    ran = Ran(r.exit_code, r.stdout, r.stderr)
    if check:
        assert ran.returncode == 0, f"brook schema {' '.join(args)} exited {ran.returncode}: {ran.stderr}"
    return ran


def test_schema_commands(url: str, tmp_path: Path) -> None:
    v1, v2, bad = tmp_path / "v1.avsc", tmp_path / "v2.avsc", tmp_path / "bad.avsc"
    fields = [{"name": "a", "type": "int"}]
    v1.write_text(json.dumps({"type": "record", "name": "Cli", "fields": fields}))
    v2.write_text(
        json.dumps(
            {
                "type": "record",
                "name": "Cli",
                "fields": [*fields, {"name": "b", "type": "string", "default": ""}],
            }
        )
    )
    bad.write_text(
        json.dumps({"type": "record", "name": "Cli", "fields": [*fields, {"name": "c", "type": "int"}]})
    )
    assert brook(url, "register", "cli-value", str(v1)).stdout.startswith("registered cli-value: id ")
    assert brook(url, "check", "cli-value", str(v2)).stdout.strip() == "compatible with cli-value"
    refused = brook(url, "check", "cli-value", str(bad), check=False)
    assert refused.returncode == 1 and "'c' has no default" in refused.stderr
    brook(url, "register", "cli-value", str(v2))
    listed = json.loads(brook(url, "list", "-o", "json").stdout)
    assert [(v["subject"], v["version"]) for v in listed] == [("cli-value", 2)]
    got = json.loads(brook(url, "get", "cli-value", "-v", "1", "-o", "json").stdout)
    assert json.loads(got["schema"])["fields"] == fields
    register_bad = brook(url, "register", "cli-value", str(bad), check=False)
    assert register_bad.returncode == 1 and "(error_code 409)" in register_bad.stderr
    assert "Traceback" not in register_bad.stderr
    assert brook(url, "config", "cli-value", "-c", "full").stdout.strip() == "cli-value: FULL"
    assert brook(url, "config").stdout.strip() == "global: BACKWARD"
    assert brook(url, "config", "cli-value").stdout.strip() == "cli-value: FULL"
    assert brook(url, "delete", "cli-value").stdout.strip() == "deleted cli-value version(s) 1, 2"
    missing = brook(url, "get", "cli-value", check=False)
    assert missing.returncode == 1 and "(error_code 40401)" in missing.stderr
    unreachable = brook("http://127.0.0.1:1", "list", check=False)
    assert unreachable.returncode == 1 and "cannot reach the schema registry" in unreachable.stderr
