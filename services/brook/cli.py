"""The `brook` command, one typer application: the client commands of brook.console, and `brook broker`
and `brook dev up` (brook.cli_server), imported only when one of them is run or help lists them.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer
import typer.main

from brook.cli_exit import fail
from brook.console import app

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def application() -> typer.Typer:
    """The whole `brook` application, server commands included."""
    if not any(c.name == "broker" for c in app.registered_commands):
        from brook import cli_server  # the broker's modules: only when a server command is wanted

        cli_server.register(app)
    return app


@app.callback()
def root(
    ctx: typer.Context,
    log_level: Annotated[
        str,
        typer.Option(
            envvar="BROOK_LOG_LEVEL", help="DEBUG, INFO, WARNING or ERROR (brook broker, brook dev)"
        ),
    ] = "INFO",
) -> None:
    """Brook: a Kafka-compatible broker, and a client for any Kafka cluster."""
    if ctx.invoked_subcommand not in SERVER_COMMANDS:
        return
    level = log_level.upper()
    if level not in LOG_LEVELS:
        fail(f"--log-level {log_level}: use DEBUG, INFO, WARNING or ERROR (or BROOK_LOG_LEVEL)")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


SERVER_COMMANDS = ("broker", "dev")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    command = _command(argv)
    if command not in SERVER_COMMANDS:
        if command is None or command not in typer.main.get_command(app).commands:  # type: ignore[attr-defined]
            application()  # --help, or an unknown command: typer lists every command
        app(args=argv, prog_name="brook")  # the client commands: typer's own error display
        return
    try:
        typer.main.get_command(application()).main(args=argv, prog_name="brook", standalone_mode=False)
    except typer.Abort:
        raise SystemExit(1) from None
    except typer.TyperException as e:  # a server's start-up errors are one line, as every other
        message = e.format_message() if hasattr(e, "format_message") else str(e)
        fail(f"{message} (see `brook {'broker' if command == 'broker' else 'dev up'} --help`)")


def _command(argv: list[str]) -> str | None:
    """The subcommand named, past the root's --log-level and its value."""
    args = iter(argv)
    for a in args:
        if a == "--log-level":
            next(args, None)
        elif not a.startswith("-"):
            return a
    return None


if __name__ == "__main__":
    main()
