"""Every `brook` command's --help renders: each option has help text, none prints a Python object (a
`%` once made argparse print a dict), and `brook broker --help` groups its options by subject."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import click
import pytest
import typer.main
from typer.testing import CliRunner

from brook.cli import application
from brook.settings.options import OPTIONS

APP = application()

ROOT = typer.main.get_command(APP)


def commands(
    group: click.Command = ROOT, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, group
    for name, sub in sorted(getattr(group, "commands", {}).items()):
        yield from commands(sub, (*path, name))


ALL = list(commands())


def test_every_command_is_found() -> None:
    names = {" ".join(p) for p, _ in ALL}
    assert {"broker", "dev up", "topic create", "group describe", "acl add", "produce", "consume"} <= names


@pytest.mark.parametrize(("path", "command"), ALL, ids=[" ".join(p) or "brook" for p, _ in ALL])
def test_help_renders(path: tuple[str, ...], command: click.Command) -> None:
    r = CliRunner().invoke(APP, [*path, "--help"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert r.output.startswith("\n Usage: brook") or "Usage: brook" in r.output
    assert not re.search(r"\{'|<function |<class |object at 0x", r.output), r.output
    undocumented = [
        p.name for p in command.params if isinstance(p, click.Option) and not (p.help or "").strip()
    ]
    assert undocumented == [] or undocumented == ["help"], undocumented
    assert command.help or command.short_help or not path


def test_broker_help_is_grouped_by_subject() -> None:
    out = CliRunner(env={"COLUMNS": "250"}).invoke(APP, ["broker", "--help"]).output
    out = re.sub(r"[│\s]+", " ", out)  # the text as read, across rich's wrapped lines
    panels = [o.panel for o in OPTIONS]
    for panel in dict.fromkeys(panels):
        assert f" {panel} " in out, panel
    assert "flag (or BROOK_* variable), an --override key=value, the --config server.properties" in out
    assert "a broker leading this many percent fewer of its preferred partitions" in out
    assert "leader.imbalance.per.broker.percentage" in out
    for o in OPTIONS:  # each option's own words are there, not only its property name and default
        assert o.help.strip() and re.sub(r"\s+", " ", o.help)[:40] in out, o.flag


def test_a_client_command_does_not_import_the_broker() -> None:
    """`brook topic ...` and the other client commands skip the broker's modules (about half of the
    command's start-up); `brook broker` imports them."""
    code = (
        "import sys\nfrom brook.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('brook.broker', 'brook.server'))))"
    )

    def loaded(*args: str) -> str:
        r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
        return r.stdout.strip().splitlines()[-1]

    assert loaded("topic", "--help") == "[]"
    assert loaded("group", "list", "--help") == "[]"
    assert "brook.broker.broker" in loaded("broker", "--help")
