"""The README's promises that code can check: it starts with exactly the two commands (run, test), and its
local-cluster examples use the ports `./scripts/up` (`brook dev up`) really defaults to."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main

from brook.cli import application

APP = application()

README = (Path(__file__).parents[2] / "README.md").read_text()


def dev_up_defaults() -> tuple[int, int, int]:
    up = typer.main.get_command(APP).commands["dev"].commands["up"]  # type: ignore[attr-defined]
    defaults = {p.name: p.default for p in up.params}
    return defaults["port"], defaults["metrics_port"], defaults["brokers"]


def test_it_starts_with_the_two_commands() -> None:
    first = re.search(r"```sh\n(.*?)```", README, re.S)
    assert first is not None and README.index(first[0]) < README.index("\n## ")
    commands = [ln.split("#")[0].strip() for ln in first[1].splitlines() if ln.strip()]
    assert commands == ["./scripts/up", "./scripts/test"]


def test_local_examples_use_the_default_ports() -> None:
    port, metrics_port, brokers = dev_up_defaults()
    bootstrap = ",".join(f"127.0.0.1:{port + i}" for i in range(brokers))
    assert f'"bootstrap: {bootstrap}"' in README.splitlines()[3]
    assert f"\nbootstrap: {bootstrap}\n" in README
    kcat = re.findall(r"^kcat -b (\S+)", README, re.M)
    assert kcat and set(kcat) == {f"127.0.0.1:{port}"}
    for i in range(brokers):
        assert f"broker {i}: bootstrap 127.0.0.1:{port + i} " in README
        assert f"metrics http://127.0.0.1:{metrics_port + i}/metrics" in README
    curls = re.findall(r"curl -s (\S+?)/", README)
    assert curls and set(curls) == {f"127.0.0.1:{metrics_port}"}
